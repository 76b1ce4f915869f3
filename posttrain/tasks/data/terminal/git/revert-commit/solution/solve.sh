#!/bin/bash
cd repo
git revert --no-edit "$(git log --format=%H --grep='^Break config parsing$')"
