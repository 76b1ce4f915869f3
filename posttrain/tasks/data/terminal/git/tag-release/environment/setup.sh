#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf '1.0.0\n' > VERSION; git add .; commit "Initial commit"
printf 'fix\n' > fix.txt; git add .; commit "Fix crash on empty input"
printf '1.2.0\n' > VERSION; git add .; commit "Bump version to 1.2.0"
printf 'wip\n' > wip.txt; git add .; commit "Start 1.3 development"
