#!/bin/bash
python3 - <<'PY'
import sqlite3, sys
try:
    db = sqlite3.connect("file:inventory.db?mode=ro", uri=True)
    cols = [r[1] for r in db.execute("PRAGMA table_info(items)")]
    rows = db.execute("SELECT name, qty, price, typeof(qty), typeof(price) FROM items").fetchall()
except sqlite3.Error as exc:
    sys.exit(f"cannot read items from inventory.db: {exc}")
if cols != ["name", "qty", "price"]:
    sys.exit(f"wrong columns {cols}")
if len(rows) != 12 or any(r[3] != "integer" or r[4] != "real" for r in rows):
    sys.exit(f"expected 12 rows with integer qty and real price, got {rows}")
if sum(r[1] for r in rows) != 1974 or round(sum(r[1] * r[2] for r in rows), 2) != 39813.82:
    sys.exit("values differ from items.csv")
if ("hinge", 274, 19.03) not in [r[:3] for r in rows]:
    sys.exit("row hinge missing")
PY
