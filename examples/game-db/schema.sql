-- The seed's game database (the study's "game" DB), simplified to the columns its query mix
-- touches; names as the seed has them. Columns the updates write (amount, start_time, x, y,
-- modification_date) are in no index, and the updated tables leave room in their pages
-- (fillfactor < 100): PostgreSQL can then write the new row version on the same page without
-- touching an index, a HOT update, which the seed counted at 90 % of its updates.
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;

CREATE TABLE core_player (
  id bigint PRIMARY KEY, guest boolean NOT NULL, name text NOT NULL, nickname text,
  premium_points int NOT NULL, soft_deleted boolean NOT NULL, session_id uuid NOT NULL
);
CREATE TABLE player (
  id bigint PRIMARY KEY, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL,
  core_player_id bigint NOT NULL REFERENCES core_player (id)
);
CREATE TABLE game_entity (
  id bigint PRIMARY KEY, type text NOT NULL, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL
);
CREATE TABLE city (id bigint PRIMARY KEY REFERENCES game_entity (id), game_design text NOT NULL, player_id bigint NOT NULL);
CREATE INDEX city_player_id ON city (player_id);
CREATE TABLE survivor (
  id bigint PRIMARY KEY REFERENCES game_entity (id), game_design text NOT NULL, owning_entity_id bigint NOT NULL, type text NOT NULL
);
CREATE TABLE building (
  id bigint PRIMARY KEY REFERENCES game_entity (id), game_design text NOT NULL, owning_entity_id bigint NOT NULL,
  x int NOT NULL, y int NOT NULL, rotation text NOT NULL, type text NOT NULL, modification_date timestamptz
) WITH (fillfactor = 80);
CREATE INDEX building_owning_entity_id ON building (owning_entity_id);
-- Constructions start (insert) and finish (delete): the mix's inserts and deletes.
CREATE TABLE construction (
  id bigint PRIMARY KEY, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL,
  definition text NOT NULL, entity_id bigint NOT NULL, start timestamptz NOT NULL
);
CREATE SEQUENCE construction_id_seq;
CREATE SEQUENCE construction_done;
CREATE TABLE production (
  id bigint PRIMARY KEY, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL,
  active boolean NOT NULL, definition text NOT NULL, entity_id bigint NOT NULL, start_time timestamptz NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX production_entity_id ON production (entity_id);
CREATE TABLE core_inventory_player_resource (
  id bigint PRIMARY KEY, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL,
  amount int NOT NULL, player_id bigint NOT NULL, resource_key text NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX core_inventory_player_resource_player_id ON core_inventory_player_resource (player_id);
CREATE TABLE grid (
  id bigint PRIMARY KEY, creation_date timestamptz NOT NULL, modification_date timestamptz NOT NULL,
  area box NOT NULL, city_id bigint NOT NULL
);
CREATE INDEX grid_city_id ON grid (city_id);

-- The seed's per-table autovacuum settings: dead tuples of the hot tables were reined in by
-- lowering the scale factor from the default 0.2.
ALTER TABLE construction SET (autovacuum_vacuum_scale_factor = 0.10);
ALTER TABLE production SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE game_entity SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE building SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.01);
ALTER TABLE core_inventory_player_resource SET (autovacuum_vacuum_scale_factor = 0.10);
ALTER TABLE survivor SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.01);
