#!/usr/bin/env bash
# The payments capacity study (seed 002), end to end against built-in targets: a production
# access log (synthetic, make_log.py) → horde profile → a sighting shot → a stepped ramp to one
# instance's knee (find-max) → horde scale over 1..4 instances → the scalability model's forecast
# → instances for next year's peak with headroom. Writes one report (REPORT, default
# ./payments-report.md) a capacity planner can read; everything else goes to a temporary folder
# deleted at the end.
#
#   examples/payments/run.sh                          # a few minutes; ./payments-report.md
#   PEAK_RPS=1800 HEADROOM=25 examples/payments/run.sh
#   QUICK=1 examples/payments/run.sh                  # the same steps, short (the tests run this)
#
# The service: a built-in target of WORKERS workers × SERVICE_MS ms, its instances sharing a
# resource (a database's lock and its cache coherency traffic): each request holds it SERIAL_MS
# ms and CROSSTALK_MS ms more per other busy instance (horde target --shared-serial-ms,
# --crosstalk-ms). The runs go to Horde's store as any other (HORDE_STORE, or the default file).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
quick=${QUICK:-0}
peak_rps=${PEAK_RPS:-1500}
headroom=${HEADROOM:-20}
workers=${WORKERS:-4}
service_ms=${SERVICE_MS:-8}
serial_ms=${SERIAL_MS:-0.5}
crosstalk_ms=${CROSSTALK_MS:-0.05}
report=${REPORT:-payments-report.md}
horde=${HORDE:-$(command -v horde || echo "$here/../../.venv/bin/horde")}
python=${PYTHON:-python3}
[ -x "$horde" ] || { echo "error: the horde command was not found" >&2; echo "hint: run make setup, or set HORDE=PATH" >&2; exit 2; }
if [ "$quick" = 1 ]; then
  hours=1 sight=3s step_duration=2s scale_duration=2s
else
  hours=3 sight=20s step_duration=10s scale_duration=15s
fi

work=$(mktemp -d -t horde-payments-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "== 1. the production log: $hours h of a payments service's access log (synthetic)"
"$python" "$here/make_log.py" "$work/access.log" --hours "$hours"

echo "== 2. horde profile: the mix, the peak minute, the plan that reproduces it"
port=$(free_port)
# The health check (4 %) is left out: endpoints covering 95 % of the requests, none under 5 %.
"$horde" profile "$work/access.log" --plan "$work/plan.yaml" --json "$work/profile.json" \
  --base-url "http://127.0.0.1:$port" --cover 95 --min-share 5 --top 8
# The log holds no request body: a payment's and a transfer's, as the plan asks (its supply(...)).
sed -i -e "s|'{{ supply(\"the body of POST[^']*'|'{\"amount\": 1250, \"currency\": \"RUB\"}'|" \
       -e "s|'{{ supply(\"the body of PUT[^']*'|'{\"from\": \"wallet-1\", \"to\": \"wallet-2\", \"amount\": 300}'|" \
       "$work/plan.yaml"
"$horde" validate "$work/plan.yaml" >/dev/null

echo "== 3. one instance of the service on 127.0.0.1:$port"
"$horde" target --port "$port" --workers "$workers" --service-ms "$service_ms" \
  --shared-serial-ms "$serial_ms" --crosstalk-ms "$crosstalk_ms" >"$work/target.log" 2>&1 &
pids+=($!)
"$python" -c 'import socket, sys, time
for _ in range(100):
    try: socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); break
    except OSError: time.sleep(0.1)' "$port"

echo "== 4. the sighting shot: one VU, each endpoint unloaded"
"$horde" sight "$work/plan.yaml" --duration "$sight" --json >"$work/sight.json"

echo "== 5. the stepped ramp to one instance's knee"
"$horde" run "$work/plan.yaml" --find-max --start 50 --step 50 --step-duration "$step_duration" --max-vus 200 \
  --summary-json "$work/find-max.json" --tag example=payments >/dev/null
kill "${pids[0]}" 2>/dev/null || true

echo "== 6. horde scale over 1..4 instances, each saturated (8 VUs per instance), and the forecast"
status=0
"$horde" scale "$work/plan.yaml" --instances 4 --target-workers "$workers" --target-service-ms "$service_ms" \
  --target-shared-serial-ms "$serial_ms" --target-crosstalk-ms "$crosstalk_ms" --vus 8 --duration "$scale_duration" \
  --peak-rps "$peak_rps" --headroom "$headroom" --summary-json "$work/scale.json" --tag example=payments || status=$?

"$python" "$here/report.py" --profile "$work/profile.json" --sight "$work/sight.json" --find-max "$work/find-max.json" \
  --scale "$work/scale.json" --peak-rps "$peak_rps" --headroom "$headroom" --out "$report"
echo "report: $report"
exit "$status"
