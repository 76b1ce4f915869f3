#!/bin/bash
python3 - <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:app.db?mode=ro", uri=True)
users = db.execute("SELECT id, email, name FROM users ORDER BY id").fetchall()
expected_users = [(1, "ann@example.com", "Ann"), (2, "bob@example.com", "Bob"), (4, "cy@example.com", "Cy"),
                  (7, "dee@example.com", "Dee")]
if users != expected_users:
    sys.exit(f"users: expected {expected_users}, got {users}")
orders = db.execute("SELECT id, user_id, amount FROM orders ORDER BY id").fetchall()
expected_orders = [(100, 1, 10.0), (101, 1, 20.0), (102, 2, 7.5), (103, 1, 1.0), (104, 2, 3.0), (105, 4, 4.0),
                   (106, 7, 9.0), (107, 4, 2.5), (108, 2, 6.0)]
if orders != expected_orders:
    sys.exit(f"orders: expected {expected_orders}, got {orders}")
unique = [
    [c[2] for c in db.execute(f"PRAGMA index_info('{i[1]}')")]
    for i in db.execute("PRAGMA index_list('users')") if i[2]
]
if ["email"] not in unique:
    sys.exit("no unique index on users(email)")
PY
