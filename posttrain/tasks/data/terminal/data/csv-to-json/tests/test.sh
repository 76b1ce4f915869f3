#!/bin/bash
python3 - <<'PY'
import json, sys
expected = [
    {"name": "Alice Martin", "age": 34, "city": "Lyon"},
    {"name": "Smith, John Jr.", "age": 51, "city": "Portland, OR"},
    {"name": "Bea", "age": 7, "city": "Oslo"},
    {"name": "O'Neil, Pat", "age": 29, "city": "Dublin"},
    {"name": "Chen Wei", "age": 62, "city": "Shanghai, China"},
    {"name": 'Dana "DJ" Lee', "age": 40, "city": "Seoul"},
]
try:
    got = json.load(open("people.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"people.json unreadable: {exc}")
if got != expected or any(type(p["age"]) is not int for p in got):
    sys.exit(f"people.json is wrong: {got!r}")
PY
