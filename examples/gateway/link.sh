#!/usr/bin/env bash
# The field report's comparison through one emulated link: the gateway inside the link's
# namespace, 20 ms each way and 10 % loss on every IP packet (TCP's and KCP's alike), the same
# robots over TCP (tcp.yaml) and over KCP (kcp.yaml, its own impairment off: the link's applies),
# then both side by side. Needs root (the link's namespace and TUN devices: CAP_NET_ADMIN).
#
#   sudo examples/gateway/link.sh                      # 20 robots, 10 s each
#   sudo examples/gateway/link.sh -p robots=200 -p duration=60
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
horde="${HORDE:-horde}"
if [ "$(id -u)" != 0 ]; then
    echo "link.sh needs root: the emulated link builds a network namespace and TUN devices (CAP_NET_ADMIN)." >&2
    echo "Without root, kcp.yaml and udp.yaml impair their own datagrams: see README.md." >&2
    exit 17
fi
delay="${DELAY:-20}" loss="${LOSS:-10}"
out="$(mktemp -d)"
"$horde" link --delay-ms "$delay" --loss-percent "$loss" --seed 1 -- \
    "$horde" target --host 0.0.0.0 --port 8080 --tcp-port 7000 --kcp-port 7002 >"$out/link.log" 2>&1 &
link=$!
trap 'kill -TERM "$link" 2>/dev/null || true; wait "$link" 2>/dev/null || true; tail -n 1 "$out/link.log"; rm -rf "$out"' EXIT
for _ in $(seq 100); do
    address="$(sed -n 's/.*reach it at \([0-9.]*\).*/\1/p' "$out/link.log")"
    [ -n "$address" ] && break
    kill -0 "$link" 2>/dev/null || { cat "$out/link.log"; exit 17; }
    sleep 0.1
done
sleep 1   # the gateway's ports open
"$horde" run "$here/tcp.yaml" --base-url "tcp://$address:7000" --summary-json "$out/tcp.json" "$@"
"$horde" run "$here/kcp.yaml" --base-url "kcp://$address:7002" -p delay=0 -p loss=0 --summary-json "$out/kcp.json" "$@"
tcp_run="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$out/tcp.json")"
kcp_run="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$out/kcp.json")"
"$horde" compare "$tcp_run" "$kcp_run"
