#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
git rev-parse -q --verify refs/heads/experiment > /dev/null || fail "branch experiment missing"
[ "$(git log -1 --format=%s experiment)" = "Experiment: faster parser" ] || fail "experiment points at the wrong commit"
# the original commits were made at fixed times; a new commit would have the current time
[ "$(git log -1 --format=%at experiment)" = 1704078000 ] || fail "experiment is not the original commit"
[ "$(git log -1 --format=%s experiment^)" = "Experiment: parser skeleton" ] || fail "wrong parent"
[ "$(git show experiment:parser.txt)" = "parse fast" ] || fail "wrong content"
[ "$(git log -1 --format=%s main)" = "Add README" ] || fail "main was changed"
