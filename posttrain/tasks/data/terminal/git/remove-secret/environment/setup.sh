#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
printf 'print("v1")\n' > app.py; printf '# App\n' > README.md; git add .; commit "Initial commit"
printf 'replicas: 2\n' > deploy.yml; printf 'API_KEY=abc123\n' > secrets.env; git add .; commit "Add deployment config"
printf 'print("v2")\n' > app.py; git add .; commit "Update app"
printf 'API_KEY=def456\n' > secrets.env; printf 'replicas: 3\n' > deploy.yml; git add .; commit "Scale up and rotate key"
printf 'docs\n' > DOCS.md; git add .; commit "Add docs"
git tag v1.0
