#!/bin/bash
sqlite3 app.db <<'SQL'
BEGIN;
CREATE TEMP TABLE keep AS
  SELECT u.id AS old_id, (SELECT MIN(v.id) FROM users v WHERE lower(trim(v.email)) = lower(trim(u.email))) AS new_id
  FROM users u;
UPDATE orders SET user_id = (SELECT new_id FROM keep WHERE old_id = orders.user_id);
DELETE FROM users WHERE id IN (SELECT old_id FROM keep WHERE old_id <> new_id);
UPDATE users SET email = lower(trim(email));
CREATE UNIQUE INDEX users_email ON users(email);
COMMIT;
SQL
