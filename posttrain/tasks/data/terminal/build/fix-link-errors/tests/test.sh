#!/bin/bash
fail() { echo "$1"; exit 1; }
make clean > /dev/null 2>&1
make > /tmp/make.log 2>&1 || { tail -n 5 /tmp/make.log; fail "make failed"; }
[ -x inventory ] || fail "inventory not built"
mkdir -p /tmp/inv && cp inventory /tmp/inv/ && cd /tmp/inv || exit 1
printf 'gear 3 12.00\nspring 40 0.05\ncable 7 2.10\nclamp 1 9.99\n' > items.txt
expected='gear           3     36.00
spring        40      2.00
cable          7     14.70
clamp          1      9.99
items: 4
total: 62.69'
got=$(./inventory) || fail "inventory failed"
[ "$got" = "$expected" ] || { echo "$got"; fail "wrong report"; }
