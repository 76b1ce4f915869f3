#!/bin/bash
fail() { echo "$1"; exit 1; }
cd repo || exit 1
[ "$(git rev-list --count HEAD)" = 3 ] || fail "expected exactly one new commit"
[ "$(git ls-tree -r --name-only HEAD | sort | tr '\n' ' ')" = ".gitignore Makefile logs/README.txt src/main.c " ] || fail "wrong set of tracked files: $(git ls-tree -r --name-only HEAD | tr '\n' ' ')"
for f in build/app build/obj/main.o debug.log logs/server.log; do [ -f "$f" ] || fail "$f was deleted from disk"; done
mkdir -p build/new logs/sub && touch build/new/x.o logs/sub/new.log other.log
for f in build/app build/new/x.o debug.log logs/server.log logs/sub/new.log other.log; do
  git check-ignore -q "$f" || fail "$f is not ignored"
done
for f in src/main.c logs/README.txt Makefile; do git check-ignore -q "$f" && fail "$f is ignored"; done
rm -rf build/new logs/sub other.log
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
