"""`horde run --ui`: the dashboard serves the run while it goes, and its Stop ends it."""

from __future__ import annotations

import json
import textwrap
import time
import urllib.request
from typing import Any

from conftest import HordeCli, free_tcp_port
from horde.errors import ExitCode
from horde.store import Store


def test_the_dashboard_serves_and_stops_the_run(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = horde_cli.tmp_path / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: watched
        target: {{base_url: "http://127.0.0.1:{builtin_target.port}"}}
        scenarios:
          - name: api
            steps: [{{name: get, method: GET, path: /delay/5}}]
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 60, vus: 2}}]}}
        """)
    )
    port = free_tcp_port()
    running = horde_cli.popen("run", str(plan), "--ui", "--ui-port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        summary: dict[str, Any] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not summary.get("summary", {}).get("requests"):
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"{base}/api/runs/last", timeout=2) as response:
                    summary = json.loads(response.read())
            except OSError:
                continue
        assert summary.get("summary", {}).get("requests"), summary
        stop = urllib.request.Request(
            f"{base}/api/runs/last/control",
            data=b'{"stop": true}',
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(stop, timeout=10) as response:
            assert json.loads(response.read())["applied"] is True
        running.communicate(timeout=30)
    finally:
        running.kill()
    assert running.returncode == ExitCode.INTERRUPTED
    with Store.open(horde_cli.store_url) as store:
        [record] = store.list_runs()
    assert record.status == "interrupted" and record.summary is not None and record.summary["duration_s"] < 30
