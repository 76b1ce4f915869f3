#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf '[server]\nhost = 0.0.0.0\nport = 8080\ntimeout = 30\nworkers = 4\n' > settings.ini
git add .; commit "Initial settings"
git checkout -q -b feature
sed -i 's/^timeout = 30$/timeout = 45\nlog_level = debug/' settings.ini
printf 'feature notes\n' > NOTES.md; git add .; commit "Add debug logging"
git checkout -q main
sed -i 's/^timeout = 30$/timeout = 60/; s/^port = 8080$/port = 9090/' settings.ini
git add .; commit "Raise timeout and move port"
