#!/bin/bash
set -e
mkdir -p checks
w() { printf '#!/bin/sh\n%s\n' "$2" > "checks/$1"; chmod +x "checks/$1"; }
w disk.sh 'df / > /dev/null; exit 0'
w memory.sh 'test "$(echo 2+2 | bc)" = 5'
w network.sh 'echo "no route" >&2; exit 7'
w config.sh 'grep -q port /dev/null || exit 3'
w users.sh 'n=$(printf "a\nb\n" | wc -l); exit $((n * 20 + 2))'
w clock.sh 'exit $(( $(printf "%d" 0x10) ))'
