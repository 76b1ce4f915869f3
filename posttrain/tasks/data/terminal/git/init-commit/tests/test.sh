#!/bin/bash
fail() { echo "$1"; exit 1; }
cd project || fail "project/ missing"
[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ] || fail "project/ is not the root of a git repository"
[ "$(git rev-list --count HEAD 2>/dev/null)" = 1 ] || fail "expected exactly one commit"
[ "$(git log -1 --format=%s)" = "Initial commit" ] || fail "wrong commit message"
[ "$(git log -1 --format='%an <%ae>')" = "Dev <dev@example.com>" ] || fail "wrong author"
[ "$(git ls-tree -r --name-only HEAD | sort | tr '\n' ' ')" = "README.md docs/usage.txt src/main.py src/util.py " ] || fail "wrong files committed"
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
[ "$(git show HEAD:src/util.py | tail -n 1)" = "    return a + b" ] || fail "file content differs"
