#!/bin/bash
set -e
mkdir -p project/src project/docs
printf 'print("hello")\n' > project/src/main.py
printf 'def add(a, b):\n    return a + b\n' > project/src/util.py
printf '# Project\n' > project/README.md
printf 'Usage: run main.py\n' > project/docs/usage.txt
