#!/usr/bin/env bash
# The monitored example, end to end: the built-in target, a throw-away PostgreSQL with an
# update-heavy load of its own (pgbench, standing in for the application's database traffic),
# a run of plan.yaml watching this machine and the database, and the HTML report with the
# diagnosis. Everything it starts is stopped, and its folder deleted, when it ends (Ctrl-C too).
#
#   examples/monitored/run.sh                        # 40 s of load; report: ./monitored-report.html
#   DURATION=20 REPORT=/tmp/report.html examples/monitored/run.sh
#
# Needs PostgreSQL's server binaries (Debian: apt-get install postgresql; initdb, pg_ctl, pgbench).
# The run goes to Horde's store as any other (HORDE_STORE, or the default file).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
duration=${DURATION:-40}
report=${REPORT:-monitored-report.html}
horde=${HORDE:-$(command -v horde || echo "$here/../../.venv/bin/horde")}
[ -x "$horde" ] || { echo "error: the horde command was not found" >&2; echo "hint: run make setup, or set HORDE=PATH" >&2; exit 2; }

bindir=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -n "$bindir" ] || bindir=$(dirname "$(command -v initdb || true)")
for tool in initdb pg_ctl pgbench psql; do
  [ -x "$bindir/$tool" ] || { echo "error: $tool was not found (looked in ${bindir:-PATH})" >&2
                              echo "hint: apt-get install postgresql, or set PG_BINDIR" >&2; exit 2; }
done

work=$(mktemp -d -t horde-monitored-XXXXXX)
as_db=()
if [ "$(id -u)" = 0 ]; then
  # initdb refuses to run as root: the database runs as the postgres system user.
  as_db=(runuser -u postgres --)
  chown postgres "$work"
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
target_port=$(free_port)
pg_port=$(free_port)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  "${as_db[@]}" "$bindir/pg_ctl" --pgdata "$work/db" --mode immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "starting the built-in target on 127.0.0.1:$target_port and PostgreSQL on 127.0.0.1:$pg_port"
"$horde" target --port "$target_port" >"$work/target.log" 2>&1 &
pids+=($!)
"${as_db[@]}" "$bindir/initdb" --pgdata "$work/db" --auth trust --username postgres --no-sync >"$work/initdb.log"
# max_connections 12: pgbench's 11 clients and the monitor's own take them all, which the
# diagnosis says ("connections at max_connections").
"${as_db[@]}" "$bindir/pg_ctl" --pgdata "$work/db" --log "$work/postgres.log" --wait start --options \
  "-c port=$pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$work -c max_connections=12 -c fsync=off" >/dev/null
psql=("$bindir/psql" --quiet --no-psqlrc --host 127.0.0.1 --port "$pg_port" --username postgres --set ON_ERROR_STOP=1)
"${psql[@]}" --dbname postgres --command "CREATE DATABASE shop"
# An indexed column updated (no HOT update possible) on a table whose autovacuum is off: its dead
# tuples pile up, as they do where autovacuum is throttled too hard for the write rate.
"${psql[@]}" --dbname shop <<'SQL'
CREATE TABLE items (id int PRIMARY KEY, score int NOT NULL, hits int NOT NULL) WITH (autovacuum_enabled = false);
CREATE INDEX items_score ON items (score);
INSERT INTO items SELECT i, 0, 0 FROM generate_series(1, 20000) i;
SQL
"$bindir/pgbench" --host 127.0.0.1 --port "$pg_port" --username postgres --no-vacuum --client 11 --jobs 1 \
  --rate 200 --time $((duration + 15)) --file "$here/items.sql" shop >"$work/pgbench.log" 2>&1 &
pids+=($!)

status=0
"$horde" run "$here" --base-url "http://127.0.0.1:$target_port" -p pg_port="$pg_port" -p duration="$duration" \
  --summary-json "$work/summary.json" || status=$?
run_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' "$work/summary.json")
"$horde" report "$run_id" -o "$report"
exit "$status"
