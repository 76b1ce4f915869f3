#!/bin/bash
printf 'zed 5\nyan 91\nxi 90\nwu 1\n' > /tmp/hidden-data.txt
expected=$'players: 4\ntotal: 187\nbest: yan (91)'
got=$(python3 report.py /tmp/hidden-data.txt 2>&1)
[ "$got" = "$expected" ] || { echo "wrong output:"; echo "$got"; exit 1; }
