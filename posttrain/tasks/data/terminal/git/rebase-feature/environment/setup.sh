#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf 'v1\n' > core.txt; git add .; commit "Initial commit"
git checkout -q -b feature
printf 'search\n' > search.txt; git add .; commit "Add search"
printf 'search with filters\n' > search.txt; git add .; commit "Add search filters"
git checkout -q main
printf 'v2\n' > core.txt; git add .; commit "Update core"
printf 'docs\n' > docs.txt; git add .; commit "Add docs"
