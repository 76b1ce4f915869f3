#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x rotate.sh ] || fail "rotate.sh missing or not executable"
script=$(pwd)/rotate.sh
d=$(mktemp -d) && cd "$d" || exit 1
big() { head -c 2000 /dev/zero | tr '\0' "$1"; }
# full rotation
big a > app.log; echo one > app.log.1; echo two > app.log.2; echo three > app.log.3
"$script" || fail "rotate.sh failed"
[ -f app.log ] && [ ! -s app.log ] || fail "new app.log should exist and be empty"
[ "$(head -c 3 app.log.1)" = aaa ] && [ "$(cat app.log.2)" = one ] && [ "$(cat app.log.3)" = two ] || fail "wrong rotation"
[ ! -e app.log.4 ] || fail "app.log.4 must not exist"
# small log: untouched
echo small > app.log
"$script" || fail "rotate.sh failed on a small log"
[ "$(cat app.log)" = small ] && [ "$(cat app.log.2)" = one ] || fail "a small log must not be rotated"
# exactly 1024 bytes: untouched; 1025: rotated; gaps in numbering
rm -f app.log.*; head -c 1024 /dev/zero > app.log
"$script"; [ "$(stat -c %s app.log)" = 1024 ] && [ ! -e app.log.1 ] || fail "1024 bytes must not be rotated"
big b | head -c 1025 > app.log; echo two > app.log.2
"$script" || fail "rotate.sh failed"
[ "$(head -c 1 app.log.1)" = b ] && [ "$(cat app.log.3)" = two ] && [ ! -e app.log.2 ] || fail "wrong rotation with a missing app.log.1"
