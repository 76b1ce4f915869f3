#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
target=$(git log --format=%H --grep='^Add login form$' main)
[ -n "$target" ] || fail "history of main was changed"
[ "$(git rev-parse -q --verify refs/heads/feature/login)" = "$target" ] || fail "feature/login does not point at 'Add login form'"
[ "$(git symbolic-ref -q HEAD)" = refs/heads/main ] || fail "not on main"
[ "$(git log -1 --format=%s main)" = "Release 1.1" ] || fail "main was moved"
