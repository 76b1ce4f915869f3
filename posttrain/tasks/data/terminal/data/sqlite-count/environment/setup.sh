#!/bin/bash
set -e
python3 - <<'PY'
import random, sqlite3
r = random.Random(12)
db = sqlite3.connect("shop.db")
db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, status TEXT, total REAL)")
for i in range(1, 201):
    db.execute("INSERT INTO orders VALUES (?, ?, ?, ?)",
               (i, r.choice(["acme", "globex", "initech"]), r.choice(["shipped", "pending", "cancelled"]),
                r.randint(500, 12000) / 100))
db.commit()
PY
