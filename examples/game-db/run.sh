#!/usr/bin/env bash
# The game database example, end to end: a throw-away PostgreSQL primary with a streaming
# standby on loopback (initdb, pg_basebackup), the seed's tables filled at SCALE thousand
# players, plan.yaml's query mix steered to a target p95 while Horde watches both servers, then
# the HTML report. Halfway, a long read on the standby (hot_standby_feedback = on) holds back
# the primary's vacuum, as in the seed. Everything it starts is stopped, and its folder deleted,
# when it ends (Ctrl-C too).
#
#   examples/game-db/run.sh                                  # scale 1, 90 s; ./game-db-report.html
#   SCALE=10 DURATION=300 TARGET_MS=10 examples/game-db/run.sh
#   LONG_READ=0 examples/game-db/run.sh                      # no long read on the standby
#
# Needs PostgreSQL's server binaries (Debian: apt-get install postgresql; initdb, pg_ctl,
# pg_basebackup, psql) and pg_stat_statements (in the server package since PostgreSQL 10).
# The run goes to Horde's store as any other (HORDE_STORE, or the default file).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
scale=${SCALE:-1}
duration=${DURATION:-90}
target_ms=${TARGET_MS:-2}
long_read=${LONG_READ:-1}
report=${REPORT:-game-db-report.html}
horde=${HORDE:-$(command -v horde || echo "$here/../../.venv/bin/horde")}
[ -x "$horde" ] || { echo "error: the horde command was not found" >&2; echo "hint: run make setup, or set HORDE=PATH" >&2; exit 2; }

bindir=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -n "$bindir" ] || bindir=$(dirname "$(command -v initdb || true)")
for tool in initdb pg_ctl pg_basebackup psql; do
  [ -x "$bindir/$tool" ] || { echo "error: $tool was not found (looked in ${bindir:-PATH})" >&2
                              echo "hint: apt-get install postgresql, or set PG_BINDIR" >&2; exit 2; }
done

work=$(mktemp -d -t horde-game-db-XXXXXX)
as_db=()
if [ "$(id -u)" = 0 ]; then
  # initdb refuses to run as root: the database runs as the postgres system user.
  as_db=(runuser -u postgres --)
  chown postgres "$work"
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
primary_port=$(free_port)
standby_port=$(free_port)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for data in standby primary; do
    "${as_db[@]}" "$bindir/pg_ctl" --pgdata "$work/$data" --mode immediate stop >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

start() {  # start DATADIR PORT SETTINGS...
  local data=$1 port=$2; shift 2
  "${as_db[@]}" "$bindir/pg_ctl" --pgdata "$work/$data" --log "$work/$data.log" --wait start --options \
    "-c port=$port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$work -c max_connections=60 -c fsync=off $*" >/dev/null
}

echo "starting a PostgreSQL primary on 127.0.0.1:$primary_port and a streaming standby on 127.0.0.1:$standby_port"
"${as_db[@]}" "$bindir/initdb" --pgdata "$work/primary" --auth trust --username postgres --encoding UTF8 --locale C \
  --no-sync >"$work/initdb.log"
# autovacuum wakes each second (10 s in the seed) so that a minute's run shows its runs.
start primary "$primary_port" -c wal_level=replica -c max_wal_senders=4 -c shared_preload_libraries=pg_stat_statements \
  -c autovacuum_naptime=1
"${as_db[@]}" "$bindir/pg_basebackup" --pgdata "$work/standby" --host 127.0.0.1 --port "$primary_port" --username postgres \
  --write-recovery-conf --checkpoint fast --wal-method stream --no-sync
# hot_standby_feedback = on, as the seed had it: the standby's oldest snapshot holds back the
# primary's vacuum. pg_stat_statements preloaded there too: the extension the primary created is
# replicated, and the standby's monitor cannot read the database without it loaded.
start standby "$standby_port" -c hot_standby=on -c hot_standby_feedback=on -c wal_receiver_status_interval=1 \
  -c shared_preload_libraries=pg_stat_statements

psql=("$bindir/psql" --quiet --no-psqlrc --host 127.0.0.1 --username postgres --set ON_ERROR_STOP=1)
"${psql[@]}" --port "$primary_port" --dbname postgres --command "CREATE DATABASE game"
"${psql[@]}" --port "$primary_port" --dbname game --file "$here/schema.sql"
echo "filling the tables at scale $scale ($((scale * 1000)) players, $((scale * 100000)) buildings)"
"${psql[@]}" --port "$primary_port" --dbname game --set scale="$scale" --file "$here/fill.sql" >/dev/null

if [ "$long_read" = 1 ]; then
  # From a third of the run to two thirds: a repeatable-read transaction on the standby keeps
  # its snapshot, whose xmin the feedback sends to the primary.
  (sleep $((duration / 3)) && "${psql[@]}" --port "$standby_port" --dbname game --command \
    "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM player; SELECT pg_sleep($((duration / 3))); COMMIT" \
    >"$work/long-read.log" 2>&1) &
  pids+=($!)
fi

status=0
"$horde" run "$here" -p pg_port="$primary_port" -p standby_port="$standby_port" -p scale="$scale" \
  -p duration="$duration" -p target_ms="$target_ms" --summary-json "$work/summary.json" || status=$?
run_id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' "$work/summary.json")
"$horde" report "$run_id" -o "$report"
echo "report: $report"
exit "$status"
