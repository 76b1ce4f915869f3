#!/bin/bash
[ -f count.txt ] || { echo "count.txt missing"; exit 1; }
got=$(tr -d '[:space:]' < count.txt)
[ "$got" = "39" ] || { echo "expected 39, got '$got'"; exit 1; }
[ "$(sqlite3 shop.db 'SELECT COUNT(*) FROM orders')" = 200 ] || { echo "orders table was changed"; exit 1; }
