#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
[ "$(git log --format=%s main | tr '\n' '|')" = "Add docs|Scale up and rotate key|Update app|Add deployment config|Initial commit|" ] || fail "commit messages of main changed"
for c in $(git rev-list --all); do
  git ls-tree -r --name-only "$c" | grep -qx secrets.env && fail "commit $(git log -1 --format=%s "$c") still has secrets.env"
done
[ "$(git show main:deploy.yml)" = "replicas: 3" ] || fail "deploy.yml wrong"
[ "$(git show main~3:deploy.yml)" = "replicas: 2" ] || fail "history of deploy.yml lost"
[ "$(git show main~2:app.py)" = 'print("v2")' ] || fail "app.py history lost"
[ "$(git show main:DOCS.md)" = "docs" ] || fail "DOCS.md lost"
