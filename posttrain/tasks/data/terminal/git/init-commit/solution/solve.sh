#!/bin/bash
cd project
git init -q
git config user.name Dev
git config user.email dev@example.com
git add -A
git commit -q -m "Initial commit"
