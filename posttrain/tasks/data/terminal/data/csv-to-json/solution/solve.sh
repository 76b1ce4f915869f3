#!/bin/bash
python3 - <<'PY'
import csv, json
with open("people.csv", newline="") as f:
    rows = [{"name": r["name"], "age": int(r["age"]), "city": r["city"]} for r in csv.DictReader(f)]
json.dump(rows, open("people.json", "w"), indent=2)
PY
