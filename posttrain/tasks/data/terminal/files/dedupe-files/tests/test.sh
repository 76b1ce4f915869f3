#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -f removed.txt ] || fail "removed.txt missing"
expected_left='photos/2023/a.jpg
photos/2023/b.jpg
photos/2024/cat.jpg
photos/2024/dog.jpg
photos/Zebra.jpg
photos/inbox/IMG_003.jpg
photos/inbox/IMG_004.jpg'
expected_removed='photos/2024/summer/lake.jpg
photos/inbox/IMG_001.jpg
photos/inbox/IMG_002.jpg
photos/inbox/dog copy.jpg
photos/inbox/zebra.jpg'
[ "$(find photos -type f | LC_ALL=C sort)" = "$expected_left" ] || fail "wrong files left in photos/"
[ "$(sed 's#^\./##; /^$/d' removed.txt | LC_ALL=C sort)" = "$expected_removed" ] || fail "removed.txt is wrong"
[ "$(cat photos/2023/a.jpg)" = "sunset over lake" ] || fail "content changed"
