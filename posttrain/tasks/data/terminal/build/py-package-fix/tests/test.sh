#!/bin/bash
fail() { echo "$1"; exit 1; }
check() {
  local expected=$1; shift
  local got
  got=$(python3 -m calctool "$@" 2>&1) || fail "python3 -m calctool $* failed: $(echo "$got" | tail -n 1)"
  [ "$got" = "$expected" ] || fail "python3 -m calctool $*: expected $expected, got $got"
}
check 6 sum 1 2 3
check 1.5 mean 1 2
check 9 max 4 9 2
check 1.5 sum 0.5 1
check 4 mean 3 5
check 2.5 max 1 2.5 -7
check -3 sum -1 -2
