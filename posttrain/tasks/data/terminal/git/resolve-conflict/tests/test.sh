#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
feature=$(git rev-parse feature)
[ "$(git log -1 --format=%s "$feature")" = "Add debug logging" ] || fail "feature was changed"
[ "$(git rev-parse main^2 2>/dev/null)" = "$feature" ] || fail "main's tip is not a merge of feature"
[ "$(git log -1 --format=%s main^1)" = "Raise timeout and move port" ] || fail "main's first parent is wrong"
expected=$'[server]\nhost = 0.0.0.0\nport = 9090\ntimeout = 60\nlog_level = debug\nworkers = 4'
[ "$(git show main:settings.ini)" = "$expected" ] || fail "settings.ini is not resolved as asked"
[ "$(git show main:NOTES.md)" = "feature notes" ] || fail "NOTES.md missing"
[ -e .git/MERGE_HEAD ] && fail "merge not finished"
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
exit 0
