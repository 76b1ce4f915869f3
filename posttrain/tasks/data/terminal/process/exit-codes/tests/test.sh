#!/bin/bash
[ -f results.txt ] || { echo "results.txt missing"; exit 1; }
expected='clock.sh 16
config.sh 3
disk.sh 0
memory.sh 1
network.sh 7
users.sh 42'
got=$(sed 's/^checks\///; s/  */ /g; s/ $//; /^$/d' results.txt)
[ "$got" = "$expected" ] || { echo "wrong results:"; echo "$got"; exit 1; }
