#!/bin/bash
cd repo
export FILTER_BRANCH_SQUELCH_WARNING=1
git filter-branch -f --index-filter 'git rm -q --cached --ignore-unmatch secrets.env' --tag-name-filter cat -- --all > /dev/null
git for-each-ref --format='%(refname)' refs/original | xargs -r -n 1 git update-ref -d
