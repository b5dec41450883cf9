"""HTTP/2 end to end: `horde run` of a plan with ``http_version: 2`` against `horde target`
(h2c, and over TLS with ``horde target --tls``), the requests counted by protocol."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from conftest import HORDE_BIN, HordeCli, _default_sigint, free_tcp_port
from test_report import ReportPage


def test_horde_run_over_h2c_multiplexes_one_pooled_connection(horde_cli: HordeCli, target_process: Any) -> None:
    port = target_process()
    plan = horde_cli.tmp_path / "plan.yaml"
    # http_version unquoted, as a user writes it: YAML reads it as the number 2.
    plan.write_text(f"""
version: 1
name: h2
target:
  base_url: http://127.0.0.1:{port}
  http_version: 2
  connections: {{pool: 1}}
scenarios:
  - name: s
    steps:
      - {{name: slow, method: GET, path: /delay/20, checks: [{{type: status, in: [200]}}]}}
    workload: {{type: closed, start_vus: 20, stages: [{{duration_s: 2, vus: 20}}]}}
""")
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    # Every request answered, all over the pool's one connection.
    assert summary["connections_opened"] == 1, summary
    assert summary["errors"] == 0 and summary["errors_by_kind"] == {}, summary
    assert summary["checks"][0]["failures"] == 0, summary
    # 20 VUs waiting 20 ms each: one HTTP/1.1 connection would carry at most 50 requests/s
    # (100 in 2 s); multiplexed, about 1,000/s.
    assert summary["requests"] > 500, summary
    # Each request counted by the protocol it went over, in the summary and on the console.
    assert summary["steps"]["slow"]["http2"] == summary["requests"] == summary["http2"], summary
    assert "http1" not in summary["steps"]["slow"], summary
    assert f"requests by protocol: slow {summary['requests']:,} over HTTP/2, 0 over HTTP/1.1" in result.stdout, (
        result.stdout
    )
    report = horde_cli.tmp_path / "report.html"
    result = horde_cli.run("report", summary["run_id"], "-o", str(report), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = ReportPage(report.read_text(encoding="utf-8")).tables["steps"]
    assert rows["slow"]["http2"] == str(summary['requests']) and rows["slow"]["http1"] == "", rows["slow"]


def test_the_protocol_counts_add_up_across_generators() -> None:
    from horde.engine.snapshot import merge_steps
    from horde.engine.histogram import from_values

    def entry(**protocols: int) -> dict[str, Any]:
        sent = protocols.get("http1", 0) + protocols.get("http2", 0)
        return {
            "scenario": "s",
            "step": "get",
            "kind": "request",
            "requests": sent,
            "ok": sent,
            "errors": {},
            "bytes_sent": 0,
            "bytes_received": 0,
            "histogram": from_values([1000]),
            **protocols,
        }

    merged = merge_steps([entry(http1=2, http2=5, h2_stalls=1), entry(http2=3, h2_stalls=2)])  # type: ignore[list-item]
    assert (merged.get("http1"), merged.get("http2"), merged.get("h2_stalls")) == (2, 8, 3)
    plain = merge_steps([entry(), entry()])  # type: ignore[list-item]
    assert "http1" not in plain and "http2" not in plain


def test_horde_run_negotiates_h2_with_horde_target_tls(horde_cli: HordeCli) -> None:
    port = free_tcp_port()
    target = subprocess.Popen(
        [str(HORDE_BIN), "target", "--tls", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_default_sigint,  # stopped by SIGINT below, even under a runner started in the background
    )
    try:
        assert target.stdout is not None
        lines = [target.stdout.readline() for _ in range(3)]
        assert lines[0].startswith(f"built-in target listening on https://127.0.0.1:{port}"), lines
        assert lines[1].startswith("TLS certificate (self-signed, made now): "), lines
        certificate = Path(lines[1].split(": ", 1)[1].strip())
        assert certificate.read_text().startswith("-----BEGIN CERTIFICATE-----")
        assert f"target.ca_file: {certificate}" in lines[2], lines
        plan = horde_cli.tmp_path / "plan.yaml"
        plan.write_text(f"""
version: 1
name: h2-tls
target:
  base_url: https://127.0.0.1:{port}
  http_version: 2
  ca_file: {certificate}
scenarios:
  - name: s
    steps:
      - {{name: home, method: GET, path: /, checks: [{{type: status, in: [200]}}]}}
    workload: {{type: closed, start_vus: 4, stages: [{{duration_s: 1, vus: 4}}]}}
""")
        result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
        # Every request over HTTP/2, chosen in ALPN, on a certificate the plan trusted.
        assert summary["errors_by_kind"] == {} and summary["requests"] > 50, summary
        assert summary["steps"]["home"]["http2"] == summary["requests"], summary
        assert summary["connections_opened"] == 4, summary
    finally:
        target.send_signal(signal.SIGINT)
        target.wait(timeout=20)
    # The certificate made for this target went with it.
    assert not certificate.exists()


def test_a_parallel_group_from_the_builder_over_h2c_tried_then_run(horde_cli: HordeCli, target_process: Any) -> None:
    port = target_process()
    plan = horde_cli.tmp_path / "plan.py"
    plan.write_text(f"""
import horde
from horde import check, closed, http, parallel, scenario, stage

plan = horde.plan(
    "page",
    base_url="http://127.0.0.1:{port}",
    http_version="2",
    scenarios=[scenario("browser", steps=[
        parallel("page", *[http.get(f"r{{index}}", "/delay/200", checks=[check.status(200)]) for index in range(4)]),
    ], workload=closed([stage(2, vus=1)], start_vus=1))],
)
""")
    tried = horde_cli.run("try", str(plan), timeout=60)
    assert tried.returncode == 0, tried.stdout + tried.stderr
    # Each request of the group is its own recorded exchange.
    for index in range(4):
        assert f"r{index}" in tried.stdout, tried.stdout
    assert tried.stdout.count("GET /delay/200") == 4, tried.stdout
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    assert summary["connections_opened"] == 1, summary
    assert summary["errors"] == 0, summary
    page = summary["steps"]["page"]
    assert page["requests"] >= 3 and page["errors"] == 0, page
    for index in range(4):
        assert (
            summary["steps"][f"r{index}"]["http2"] == summary["steps"][f"r{index}"]["requests"] == page["requests"]
        ), summary["steps"]
    # Four 200 ms requests at once: a pass takes about one delay, where one after another
    # would take 800 ms (bounded loosely: a shared machine).
    assert page["latency_ms"]["p50"] < 400, page
