#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
cat > parser.sh <<'P'
#!/bin/sh
# parse key=value lines
grep -v '^#' "$1" | sed 's/ *= */=/'
P
git add .; commit "Add config parser"
printf '# Tool\n' > README.md; git add .; commit "Add README"
sed -i 's/grep -v/grep/' parser.sh; printf 'debug=1\n' > defaults.conf; git add .; commit "Break config parsing"
printf '## 1.0\n- parser\n' > CHANGELOG.md; git add .; commit "Add CHANGELOG"
