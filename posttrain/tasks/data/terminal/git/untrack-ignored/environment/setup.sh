#!/bin/bash
set -e
export GIT_AUTHOR_NAME=Dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
t=1704067200
commit() { t=$((t + 3600)); GIT_AUTHOR_DATE="@$t +0000" GIT_COMMITTER_DATE="@$t +0000" git commit -q -m "$1"; }
git init -q -b main repo
cd repo
git config user.name Dev
git config user.email dev@example.com
mkdir -p src build/obj logs
printf 'int main(void){return 0;}\n' > src/main.c
printf 'all:\n\tcc -o build/app src/main.c\n' > Makefile
printf 'ELF' > build/app; printf 'obj' > build/obj/main.o
printf 'started\n' > debug.log; printf 'GET /\n' > logs/server.log
printf 'keep me\n' > logs/README.txt
git add .; commit "Initial commit"
printf 'int main(void){return 1;}\n' > src/main.c; printf 'rebuilt\n' >> debug.log
git add .; commit "Change exit code"
