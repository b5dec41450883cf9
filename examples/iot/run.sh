#!/usr/bin/env bash
# The IoT platform's scalability study (seed 004), end to end against built-in targets: devices
# writing every 1, 5 or 10 s and users reading, at once (plan.yaml); for 1, 3 and 5 instances
# the maximum throughput before p95 passes 1 s (find-max with a 1 s latency limit, its steps
# growing with the count); then the scalability model fitted to those three knees and its
# forecast past them (horde scale --from-study). Writes one report (REPORT, default
# ./iot-report.md); everything else goes to a temporary folder deleted at the end.
#
#   examples/iot/run.sh                   # a few minutes; ./iot-report.md
#   QUICK=1 examples/iot/run.sh           # devices 10× as often, a tenth of them, short steps (the tests)
#
# The platform: COUNTS' largest number of built-in targets in one process (targets.py), each
# WORKERS workers × SERVICE_MS ms, sharing a resource (its database): each request holds it
# SERIAL_MS ms and CROSSTALK_MS ms more per other busy instance. The runs go to Horde's store as
# any other (HORDE_STORE, or the default file), tagged scale_study=ID and instances=K.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
quick=${QUICK:-0}
counts=${COUNTS:-1 3 5}
workers=${WORKERS:-2}
service_ms=${SERVICE_MS:-19}
serial_ms=${SERIAL_MS:-1}
crosstalk_ms=${CROSSTALK_MS:-0.1}
report=${REPORT:-iot-report.md}
horde=${HORDE:-$(command -v horde || echo "$here/../../.venv/bin/horde")}
[ -x "$horde" ] || { echo "error: the horde command was not found" >&2; echo "hint: run make setup, or set HORDE=PATH" >&2; exit 2; }
# targets.py imports horde: the Python that horde runs on.
python=${PYTHON:-$(dirname "$horde")/python}
if [ "$quick" = 1 ]; then
  # 100 VUs (at the weights) send about 430 req/s: one instance (4 workers: 200 req/s)
  # saturates near 46, and a short step gathers the samples find-max needs.
  workers=${WORKERS:-4}
  pace=(-p every_1=0.1 -p every_5=0.5 -p every_10=1 -p every_1_ms=90 -p every_5_ms=450 -p every_10_ms=900
        -p user_think_ms=200)
  start=36 step=12 step_duration=2s
else
  # 100 VUs send about 43 req/s: one instance saturates near 230.
  pace=()
  start=120 step=60 step_duration=20s
fi

work=$(mktemp -d -t horde-iot-XXXXXX)
targets_pid=
cleanup() {
  [ -z "$targets_pid" ] || { kill "$targets_pid" 2>/dev/null || true; wait "$targets_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

largest=$(printf '%s\n' $counts | sort -n | tail -n 1)
echo "== the platform: $largest instances sharing one database"
"$python" "$here/targets.py" "$work/urls.json" --count "$largest" --workers "$workers" --service-ms "$service_ms" \
  --serial-ms "$serial_ms" --crosstalk-ms "$crosstalk_ms" &
targets_pid=$!
for _ in $(seq 100); do [ -f "$work/urls.json" ] && break; sleep 0.1; done
[ -f "$work/urls.json" ] || { echo "error: the targets did not start" >&2; exit 1; }

study=iot-$(date -u +%Y%m%d-%H%M%S)-$$
for k in $counts; do
  echo "== $k instance(s): the maximum throughput before p95 passes 1 s"
  # The first instance is the plan's base URL, the next k - 1 its target.instances.
  "$python" -c 'import json, sys
urls = json.load(open(sys.argv[1]))[: int(sys.argv[2])]
text = open(sys.argv[3]).read().replace("  instances: []", "  instances: " + json.dumps(urls[1:]), 1)
open(sys.argv[4], "w").write(text)
print(urls[0])' "$work/urls.json" "$k" "$here/plan.yaml" "$work/plan-$k.yaml" >"$work/base-$k"
  "$horde" run "$work/plan-$k.yaml" -p base_url="$(cat "$work/base-$k")" "${pace[@]}" \
    --find-max --start $((start * k)) --step $((step * k)) --step-duration "$step_duration" \
    --latency-limit-ms 1000 --percentile 95 \
    --tag scale_study="$study" --tag instances="$k" --tag example=iot --summary-json "$work/run-$k.json" >/dev/null
done

echo "== the scalability model over the study's knees ($study)"
"$horde" scale --from-study "$study" --summary-json "$work/scale.json"

"$python" "$here/report.py" --scale "$work/scale.json" --runs "$work"/run-*.json --out "$report"
echo "report: $report"
