-- The seed's fill: one INSERT ... SELECT generate_series(...) per table, ids from 1,000,000,000
-- as in the seed, at `scale` thousand players (psql -v scale=N; the seed had a million players,
-- 100 million buildings, about 80 GB). Per player, as in the seed: a city, a survivor, two
-- resources, 20 grid cells, 100 buildings, 2 constructions and 50 productions. The seed's
-- entity ranges start at fixed offsets (1,001,000,000 for survivors, 1,002,000,000 for
-- buildings); here they follow the player count, so that any scale fits.
-- (psql substitutes these as text: each is an SQL expression where it is used)
\set players (1000 * :scale)
\set survivors (1000000000 + :players)
\set buildings (1000000000 + 2 * :players)

INSERT INTO core_player (id, guest, name, nickname, premium_points, soft_deleted, session_id)
  SELECT 1000000000 + g, true, 'guest0000000000000000000', null, 100, false, '00000000-0000-0000-0000-000000000000'
  FROM generate_series(0, :players - 1) g;
INSERT INTO player (id, creation_date, modification_date, core_player_id)
  SELECT 1000000000 + g, now(), now(), 1000000000 + g FROM generate_series(0, :players - 1) g;

-- city
INSERT INTO game_entity (id, type, creation_date, modification_date)
  SELECT 1000000000 + g, 'city', now(), now() FROM generate_series(0, :players - 1) g;
INSERT INTO city (id, game_design, player_id)
  SELECT 1000000000 + g, 'city.default', 1000000000 + g FROM generate_series(0, :players - 1) g;

-- survivor
INSERT INTO game_entity (id, type, creation_date, modification_date)
  SELECT :survivors + g, 'survivor', now(), now() FROM generate_series(0, :players - 1) g;
INSERT INTO survivor (id, game_design, owning_entity_id, type)
  SELECT :survivors + g, 'survivor.prod_1', 1000000000 + g, 'survivor' FROM generate_series(0, :players - 1) g;

-- core_inventory_player_resource: two per player
INSERT INTO core_inventory_player_resource (id, creation_date, modification_date, amount, player_id, resource_key)
  SELECT 1000000000 + g, now(), now(), 1000, 1000000000 + g / 2, 'resource_' || g % 2
  FROM generate_series(0, 2 * :players - 1) g;

-- grid: 20 cells per city (the seed dropped the GiST index for the fill and built it after)
INSERT INTO grid (id, creation_date, modification_date, area, city_id)
  SELECT 1000000000 + g, now(), now(), box '0,0,4,4', 1000000000 + g / 20 FROM generate_series(0, 20 * :players - 1) g;
CREATE INDEX grid_area ON grid USING gist (area box_ops);

-- building: 100 per city
INSERT INTO game_entity (id, type, creation_date, modification_date)
  SELECT :buildings + g, 'building', now(), now() FROM generate_series(0, 100 * :players - 1) g;
INSERT INTO building (id, game_design, owning_entity_id, x, y, rotation, type)
  SELECT :buildings + g, 'building.building_prod_1', 1000000000 + g / 100, 0, 0, 'DEGREES_0', 'building'
  FROM generate_series(0, 100 * :players - 1) g;

-- construction: 2 per player, on every 50th building
INSERT INTO construction (id, creation_date, modification_date, definition, entity_id, start)
  SELECT 1000000000 + g, now(), now(), 'construction.building_prod_1-construction', :buildings + g * 50, now()
  FROM generate_series(0, 2 * :players - 1) g;
-- New constructions get the ids after the filled ones; finished ones are deleted oldest first.
SELECT setval('construction_id_seq', 1000000000 + 2 * :players - 1);
SELECT setval('construction_done', 1000000000, false);

-- production: 50 per player, on every other building
INSERT INTO production (id, creation_date, modification_date, active, definition, entity_id, start_time)
  SELECT 1000000000 + g, now(), now(), true, 'production.building_prod_1_production_1', :buildings + g * 2, now()
  FROM generate_series(0, 50 * :players - 1) g;

VACUUM ANALYZE;
