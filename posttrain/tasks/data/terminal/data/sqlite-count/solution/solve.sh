#!/bin/bash
sqlite3 shop.db "SELECT COUNT(*) FROM orders WHERE status = 'shipped' AND total > 50;" > count.txt
