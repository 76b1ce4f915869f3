#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
[ "$(git symbolic-ref -q HEAD)" = refs/heads/main ] || fail "not on main"
last=$(git log --format=%H --grep='^Add CHANGELOG$' main)
[ -n "$last" ] || fail "existing commits were rewritten"
[ "$(git rev-parse "$last^")" = "$(git log --format=%H --grep='^Break config parsing$' main)" ] || fail "history was rewritten"
[ "$(git rev-list --count main)" = 5 ] || fail "expected exactly one new commit on main"
[ "$(git rev-parse main^)" = "$last" ] || fail "the new commit must be on top of 'Add CHANGELOG'"
[ "$(git show main:parser.sh | sed -n 3p)" = "grep -v '^#' \"\$1\" | sed 's/ *= */=/'" ] || fail "parser.sh not restored"
git cat-file -e main:defaults.conf 2>/dev/null && fail "defaults.conf (added by the bad commit) still there"
git cat-file -e main:CHANGELOG.md 2>/dev/null || fail "CHANGELOG.md lost"
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
