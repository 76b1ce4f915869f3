#!/bin/bash
find docs -type f -name '*.txt' -print0 | while IFS= read -r -d '' f; do
  python3 - "$f" <<'PY'
import sys
path = sys.argv[1]
text = open(path, "rb").read().decode()
lines = [line.rstrip(" \t") for line in text.replace("\r\n", "\n").split("\n")]
while lines and lines[-1] == "":
    lines.pop()
open(path, "wb").write(("\n".join(lines) + "\n").encode())
PY
done
