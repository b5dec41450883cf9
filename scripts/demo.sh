#!/usr/bin/env bash
# The demo behind `make demo`: start the built-in target on 127.0.0.1:8080 in its own process,
# run examples/quickstart against it (live view, stored in the default SQLite store), stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
horde=.venv/bin/horde
port="${HORDE_DEMO_PORT:-8080}"

"$horde" target --port "$port" &
target_pid=$!
trap 'kill "$target_pid" 2>/dev/null; wait "$target_pid" 2>/dev/null || true' EXIT

# Wait (bounded) until the target answers, or say why not.
for _ in $(seq 1 50); do
  if .venv/bin/python -c "import socket,sys; s=socket.socket(); s.settimeout(0.2); sys.exit(s.connect_ex(('127.0.0.1', $port)))" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$target_pid" 2>/dev/null; then
    echo "error: the built-in target could not start on port $port" >&2
    echo "hint: free the port, or run with HORDE_DEMO_PORT=<another port>" >&2
    exit 2
  fi
  sleep 0.1
done

"$horde" run examples/quickstart --base-url "http://127.0.0.1:$port" --tag demo=quickstart
