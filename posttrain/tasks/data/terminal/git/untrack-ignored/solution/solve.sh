#!/bin/bash
cd repo
git rm -r -q --cached build
git ls-files '*.log' | xargs git rm -q --cached
printf 'build/\n*.log\n' > .gitignore
git add .gitignore
git commit -q -m "Stop tracking build output and logs"
