#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf 'parse v1\n' > parser.txt; git add .; commit "Initial commit"
git checkout -q -b experiment
printf 'parse skeleton\n' > parser.txt; git add .; commit "Experiment: parser skeleton"
printf 'parse fast\n' > parser.txt; printf 'bench\n' > bench.txt; git add .; commit "Experiment: faster parser"
git checkout -q main
printf 'readme\n' > README.md; git add .; commit "Add README"
git branch -q -D experiment
