#!/bin/bash
fail() { echo "$1"; exit 1; }
[ -x greet ] || fail "greet is missing or not executable"
[ "$(head -c 4 greet | od -An -c | tr -d ' ')" = '177ELF' ] || fail "greet is not a compiled ELF executable"
[ "$(./greet)" = "Hello, stranger!" ] || fail "wrong output without arguments"
[ "$(./greet Ada Linus)" = $'Hello, Ada! (1 of 2)\nHello, Linus! (2 of 2)' ] || fail "wrong output with arguments"
