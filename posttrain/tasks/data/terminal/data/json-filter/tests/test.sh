#!/bin/bash
[ -f active.txt ] || { echo "active.txt missing"; exit 1; }
expected='ana@example.org
ben@example.org
cleo@example.org
finn@example.org
hana@example.org
kai@example.org'
got=$(sed 's/^"//; s/"$//; /^$/d' active.txt)
[ "$got" = "$expected" ] || { echo "wrong emails:"; echo "$got"; exit 1; }
