#!/bin/bash
python3 - "$(dirname "$0")/stats.expected.json" <<'PY'
import json, sys
expected = json.load(open(sys.argv[1]))
try:
    got = json.load(open("stats.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"stats.json unreadable: {exc}")
if not isinstance(got, dict):
    sys.exit("stats.json is not an object")
for key, value in expected.items():
    if got.get(key) != value:
        sys.exit(f"{key}: expected {value!r}, got {got.get(key)!r}")
PY
