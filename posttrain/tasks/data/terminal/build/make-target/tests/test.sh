#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x calc ] || fail "calc is missing"
[ "$(head -c 4 calc | od -An -c | tr -d ' ')" = '177ELF' ] || fail "calc is not a compiled ELF executable"
[ "$(./calc add 19 23)" = 42 ] || fail "calc add is wrong"
[ "$(./calc mul -6 7)" = -42 ] || fail "calc mul is wrong"
./calc div 1 2 > /dev/null 2>&1 && fail "calc accepts an unknown operation"
exit 0
