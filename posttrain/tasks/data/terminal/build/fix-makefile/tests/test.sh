#!/bin/bash
fail() { echo "$1"; exit 1; }
[ "$(sha256sum stats.c | cut -d' ' -f1)" = d9ed7894ae8b586363aa9020830a9c08ee085ff161bb02328c28c3760cba7727 ] || fail "stats.c was changed"
make clean > /dev/null 2>&1
make > /tmp/make.log 2>&1 || { tail -n 5 /tmp/make.log; fail "make failed"; }
[ "$(printf '2 4 4 4 5 5 7 9' | ./stats)" = "n=8 mean=5.000 sd=2.000" ] || fail "stats prints a wrong result"
[ "$(printf '1.5\n2.5' | ./stats)" = "n=2 mean=2.000 sd=0.500" ] || fail "stats prints a wrong result"
