#!/bin/bash
set -e
sqlite3 app.db <<'SQL'
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT, name TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id), amount REAL);
INSERT INTO users VALUES
  (1, 'ann@example.com', 'Ann'), (2, 'Bob@Example.com', 'Bob'), (3, ' ann@example.com', 'Ann B'),
  (4, 'cy@example.com', 'Cy'), (5, 'bob@example.com ', 'Robert'), (6, 'ANN@EXAMPLE.COM', 'A.'),
  (7, 'dee@example.com', 'Dee'), (8, 'Cy@example.com', 'Cyrus');
INSERT INTO orders VALUES
  (100, 1, 10.0), (101, 3, 20.0), (102, 5, 7.5), (103, 6, 1.0), (104, 2, 3.0), (105, 8, 4.0),
  (106, 7, 9.0), (107, 4, 2.5), (108, 5, 6.0);
SQL
