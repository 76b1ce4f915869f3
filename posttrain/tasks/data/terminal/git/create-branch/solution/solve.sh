#!/bin/bash
cd repo
git branch feature/login "$(git log --format=%H --grep='^Add login form$' main)"
