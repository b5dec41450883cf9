-- pgbench's script for examples/monitored: the application's database traffic, a read and an
-- update of a random item (the update touches an indexed column, so no update is HOT).
\set id random(1, 20000)
SELECT score FROM items WHERE id = :id;
UPDATE items SET score = score + 1 WHERE id = :id;
