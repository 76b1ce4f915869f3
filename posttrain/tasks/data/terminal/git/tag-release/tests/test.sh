#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
target=$(git log --format=%H --grep='^Bump version to 1.2.0$' main)
[ "$(git cat-file -t refs/tags/v1.2.0 2>/dev/null)" = tag ] || fail "v1.2.0 is not an annotated tag"
[ "$(git rev-parse 'v1.2.0^{commit}')" = "$target" ] || fail "v1.2.0 is on the wrong commit"
[ "$(git tag -l --format='%(contents:subject)' v1.2.0)" = "Release 1.2.0" ] || fail "wrong tag message"
