#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
[ "$(git log --format=%s main | tr '\n' '|')" = "Add docs|Update core|Initial commit|" ] || fail "main was changed"
git merge-base --is-ancestor main feature || fail "feature does not contain main"
[ "$(git log --format=%s main..feature | tr '\n' '|')" = "Add search filters|Add search|" ] || fail "feature's own commits are wrong"
[ -z "$(git rev-list --merges main..feature)" ] || fail "merge commits on feature"
[ "$(git show feature:search.txt)" = "search with filters" ] || fail "search.txt wrong"
[ "$(git show feature:core.txt)" = "v2" ] || fail "core.txt wrong on feature"
[ -f .git/rebase-merge ] || [ -d .git/rebase-merge ] && fail "rebase still in progress"
exit 0
