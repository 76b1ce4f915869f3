#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf 'app\n' > app.txt; git add .; commit "Initial commit"
printf '<form>login</form>\n' > login.html; git add .; commit "Add login form"
printf 'body {}\n' > style.css; git add .; commit "Add styles"
printf '<form>login v2</form>\n' > login.html; git add .; commit "Rework login form"
printf 'app 1.1\n' > app.txt; git add .; commit "Release 1.1"
