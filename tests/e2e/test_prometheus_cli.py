"""`horde run --prometheus PORT`: the live run is scraped over HTTP, labelled with its run id,
and a port already in use stops the command before any load."""

from __future__ import annotations

import json
import socket
import textwrap
import time
import urllib.request
from typing import Any

from conftest import HordeCli, free_tcp_port
from horde.errors import ExitCode


def test_a_running_run_is_scraped_with_its_run_id(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = horde_cli.tmp_path / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: scraped
        target: {{base_url: "http://127.0.0.1:{builtin_target.port}"}}
        scenarios:
          - name: api
            steps: [{{name: get, method: GET, path: /delay/5}}]
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 4, vus: 2}}]}}
        """)
    )
    port = free_tcp_port()
    out = horde_cli.tmp_path / "summary.json"
    running = horde_cli.popen("run", str(plan), "--prometheus", str(port), "--summary-json", str(out))
    text = ""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "horde_requests_total{" not in text:
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    text = response.read().decode()
            except OSError:
                continue
        running.communicate(timeout=30)
    finally:
        running.kill()
    assert running.returncode == ExitCode.OK
    run_id = json.loads(out.read_text())["run_id"]
    assert f'run="{run_id}"' in text and 'plan="scraped"' in text
    assert 'horde_requests_total{' in text and "horde_active_vus{" in text


def test_a_port_in_use_stops_the_run_before_any_load(horde_cli: HordeCli, builtin_target: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = horde_cli.run(
            "run",
            "--url",
            f"http://127.0.0.1:{builtin_target.port}/",
            "--vus",
            "1",
            "--duration",
            "1s",
            "--prometheus",
            str(port),
        )
    assert result.returncode == ExitCode.INVALID_INPUT, result.stderr
    assert "already in use" in result.stderr and "hint:" in result.stderr
    assert json.loads(horde_cli.run("runs", "--json").stdout) == []
