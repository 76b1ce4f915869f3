#!/bin/bash
fail() { echo "$1"; exit 1; }
make -B wordfreq > /tmp/make.log 2>&1 || { tail -n 5 /tmp/make.log; fail "make failed"; }
long=$(printf 'x%.0s' $(seq 1 90))
printf 'Beta alpha\n\n\nGAMMA beta, alpha! alpha\n   \n%s beta %s\nzeta-eta (eta) 3d\n' "$long" "$long" > /tmp/in1.txt
expected=$(printf '3 alpha\n3 beta\n2 eta\n2 %s\n1 d\n1 gamma\n1 zeta' "$long")
got=$(timeout 5 ./wordfreq /tmp/in1.txt) || fail "wordfreq crashed or failed on an input with empty lines and long words"
[ "$got" = "$expected" ] || { echo "$got" | head -n 8; fail "wrong output"; }
printf 'one two two three three three\n' > /tmp/in2.txt
[ "$(./wordfreq /tmp/in2.txt)" = $'3 three\n2 two\n1 one' ] || fail "wrong order"
