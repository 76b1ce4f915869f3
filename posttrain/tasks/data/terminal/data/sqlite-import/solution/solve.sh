#!/bin/bash
sqlite3 inventory.db <<'SQL'
CREATE TABLE items (name TEXT, qty INTEGER, price REAL);
.import --csv --skip 1 items.csv items
SQL
