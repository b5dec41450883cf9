"""The push outputs (``horde run --out``, horde.sinks.push) received by a real Prometheus (Debian's
``prometheus``, its remote-write receiver on a loopback port) and by an OTLP/HTTP receiver written
here (no OpenTelemetry collector is packaged for Debian): what they hold at the end equals the
stored run. A target that is down costs a warning and a count, never the run; on a cluster the
coordinator pushes the merged run once, its percentiles those of the exact merge."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import free_tcp_port
from horde.engine.snapshot import merge_seconds
from horde.engine import histogram
from horde.engine.run import Run
from horde.engine.snapshot import Snapshot
from horde.errors import ExitCode, InvalidInput
from horde.plan import plan_from_dict
from horde.sinks.prometheus import PrometheusExporter, run_labels
from horde.sinks.push import PushSink, parse_out

PROMETHEUS = shutil.which("prometheus")
DASHBOARD = Path(__file__).parent.parent / "examples" / "grafana" / "horde-dashboard.json"


# --- a real Prometheus -----------------------------------------------------------------------------


@dataclass
class Prometheus:
    port: int

    @property
    def write_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1/write"

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        asked = {"query": promql, **({"time": str(at)} if at is not None else {})}
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(asked)
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Prometheus on a free loopback port, its remote-write receiver on, a storage of its own."""
    if PROMETHEUS is None:
        pytest.fail("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    folder = tmp_path_factory.mktemp("prometheus")
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    version = subprocess.run([PROMETHEUS, "--help"], capture_output=True, text=True, check=False)
    # The flag arrived in 2.33; older ones had the receiver behind a feature flag.
    receiver = (
        "--web.enable-remote-write-receiver"
        if "--web.enable-remote-write-receiver" in version.stdout + version.stderr
        else "--enable-feature=remote-write-receiver"
    )
    port = free_tcp_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            receiver,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, "prometheus exited at start"
            assert time.monotonic() < deadline, "prometheus not ready after 30 s"
            time.sleep(0.1)
        yield Prometheus(port)
    finally:
        process.terminate()
        process.wait(timeout=15)


# --- an OTLP/HTTP receiver ---------------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class OtlpReceiver:
    port: int
    received: list[Received] = field(default_factory=list)
    #: What it answers: 200, or a refusal a test sets; and how long it takes to.
    status: int = 200
    delay_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def points(self, index: int, name: str) -> list[dict[str, Any]]:
        """The data points of metric ``name`` in the ``index``-th request, attributes as a dict."""
        found: list[dict[str, Any]] = []
        for resource in self.received[index].body["resourceMetrics"]:
            for scope in resource["scopeMetrics"]:
                for metric in scope["metrics"]:
                    if metric["name"] != name:
                        continue
                    data = metric.get("sum") or metric.get("gauge") or metric.get("histogram")
                    for point in data["dataPoints"]:
                        labels = {item["key"]: item["value"]["stringValue"] for item in point["attributes"]}
                        found.append({**point, "labels": labels})
        return found


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    """Takes OTLP/HTTP JSON requests on a free loopback port and keeps each one, decoded."""
    receiver = OtlpReceiver(0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(receiver.delay_s)
            receiver.received.append(Received(self.path, dict(self.headers), json.loads(body)))
            answer = b"{}" if receiver.status == 200 else b"bad data point"
            self.send_response(receiver.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def stored(horde_cli: Any, run_id: str) -> dict[str, Any]:
    shown = horde_cli.run("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    summary: dict[str, Any] = json.loads(shown.stdout)
    return summary


def short_run(horde_cli: Any, target_port: int, *flags: str, summary: Path) -> Any:
    return horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{target_port}/delay/1",
        "--vus",
        "2",
        "--duration",
        "3s",
        "--workers",
        "1",
        "--tag",
        "build=42",
        "--summary-json",
        str(summary),
        *flags,
        timeout=60,
    )


# --- Prometheus remote write ---------------------------------------------------------------------


def test_a_run_pushed_to_a_real_prometheus_totals_what_is_stored(
    prometheus: Prometheus, target_process: Any, horde_cli: Any, tmp_path: Path
) -> None:
    port = target_process()
    summary_path = tmp_path / "summary.json"
    result = short_run(horde_cli, port, "--out", f"prometheus-rw={prometheus.write_url}", summary=summary_path)
    assert result.returncode == 0, result.stderr + result.stdout
    summary = json.loads(summary_path.read_text())
    run_id = summary["run_id"]
    total = stored(horde_cli, run_id)["requests"]
    assert total > 100

    # What Prometheus holds, asked in PromQL: the counter, labelled with the run, the plan and the tag.
    series = prometheus.query(f'horde_requests_total{{run="{run_id}",step_kind="request"}}')
    assert len(series) == 1 and int(float(series[0]["value"][1])) == total
    assert series[0]["metric"]["build"] == "42" and series[0]["metric"]["plan"] == "url"
    counted = prometheus.query(f'sum(horde_step_latency_seconds_count{{run="{run_id}"}})')
    assert int(float(counted[0]["value"][1])) == total
    # Each second as it ended, not only the end: the counter has a sample per second of the run.
    samples = prometheus.query(f'count_over_time(horde_requests_total{{run="{run_id}",step_kind="request"}}[5m])')
    assert int(samples[0]["value"][1]) >= 3
    assert prometheus.query(f'horde_latency_quantile_seconds{{run="{run_id}",quantile="0.99"}}')
    assert summary["outputs"] == [
        {
            "kind": "prometheus-rw",
            "url": prometheus.write_url,
            "pushed": int(samples[0]["value"][1]),
            "failed": 0,
            "series_not_sent": 0,
            "last_error": None,
        }
    ]
    assert f"pushed {int(samples[0]['value'][1])} seconds to prometheus-rw {prometheus.write_url}" in result.stdout

    # The Grafana dashboard reads the pushed series: each of its queries, at the run's last
    # second, has data, but for what this run has none of (an open model's rate, errors by kind).
    ended = float(series[0]["value"][0])
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    empty = {
        expression
        for expression in expressions
        if not prometheus.query(
            expression.replace("$run", run_id).replace("$step", ".*").replace("$__rate_interval", "10s"), ended
        )
    }
    assert empty == {
        'horde_target_rate_per_second{run="$run"}',
        'sum by (kind) (rate(horde_errors_total{run="$run", step=~"$step"}[$__rate_interval]))',
    }


# --- OTLP ------------------------------------------------------------------------------------------


def test_a_run_pushed_over_otlp_totals_what_is_stored(
    otlp: OtlpReceiver, target_process: Any, horde_cli: Any, tmp_path: Path
) -> None:
    port = target_process()
    summary_path = tmp_path / "summary.json"
    result = short_run(horde_cli, port, "--out", f"otlp={otlp.url}", summary=summary_path)
    assert result.returncode == 0, result.stderr + result.stdout
    run_id = json.loads(summary_path.read_text())["run_id"]
    total = stored(horde_cli, run_id)["requests"]

    assert len(otlp.received) >= 3  # one a second as the run goes, the final one included
    assert {one.path for one in otlp.received} == {"/v1/metrics"}
    assert {one.headers["Content-Type"] for one in otlp.received} == {"application/json"}
    last = len(otlp.received) - 1
    requests = [
        point for point in otlp.points(last, "horde_requests_total") if point["labels"]["step_kind"] == "request"
    ]
    assert len(requests) == 1 and int(requests[0]["asInt"]) == total
    assert requests[0]["labels"]["run"] == run_id and requests[0]["labels"]["build"] == "42"
    # The counter only grows, second after second, to the stored total.
    seen = [
        int(point["asInt"])
        for index in range(len(otlp.received))
        for point in otlp.points(index, "horde_requests_total")
        if point["labels"]["step_kind"] == "request"
    ]
    assert seen == sorted(seen) and seen[0] < total
    latency = otlp.points(last, "horde_step_latency_seconds")
    assert len(latency) == 1 and int(latency[0]["count"]) == total
    assert sum(int(count) for count in latency[0]["bucketCounts"]) == total
    assert len(latency[0]["bucketCounts"]) == len(latency[0]["explicitBounds"]) + 1


# --- a target that is down -------------------------------------------------------------------------


def test_a_push_target_that_is_down_is_a_warning_and_a_count(
    target_process: Any, horde_cli: Any, tmp_path: Path
) -> None:
    port = target_process()
    down = f"http://127.0.0.1:{free_tcp_port()}/api/v1/write"
    summary_path = tmp_path / "summary.json"
    started = time.monotonic()
    result = short_run(horde_cli, port, "--out", f"prometheus-rw={down}", summary=summary_path)
    assert result.returncode == ExitCode.OK, result.stderr + result.stdout
    assert time.monotonic() - started < 30
    outputs = json.loads(summary_path.read_text())["outputs"]
    assert len(outputs) == 1 and outputs[0]["pushed"] == 0 and outputs[0]["failed"] >= 3
    assert outputs[0]["series_not_sent"] > outputs[0]["failed"] and "refused" in outputs[0]["last_error"]
    assert f"warning: --out prometheus-rw {down}: a second's figures were not sent after 3 tries" in result.stdout
    assert (
        f"warning: --out prometheus-rw {down}: {outputs[0]['failed']} of {outputs[0]['failed']} seconds not sent "
        f"({outputs[0]['series_not_sent']} series)" in result.stdout
    )


def synthetic_second(second: int, requests: int) -> Snapshot:
    entry = {
        "scenario": "s",
        "step": "home",
        "kind": "request",
        "requests": requests,
        "ok": requests,
        "errors": {},
        "bytes_sent": 10,
        "bytes_received": 20,
        "histogram": histogram.from_values([1000 + n for n in range(requests)]),
    }
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "final": False,
        "steps": [entry],
        "active_vus": 2,
        "busy_vus": 1,
        "iterations": 2,
        "dropped_arrivals": 0,
        "connections_opened": 2,
        "target_vus": 2,
        "target_rate_per_s": None,
        "cpu_percent": 1.0,
        "timer_lateness_p99_ms": 0.1,
    }


def test_seconds_behind_a_slow_push_go_with_the_next_one_and_are_counted(otlp: OtlpReceiver) -> None:
    otlp.delay_s = 0.5
    push = PushSink(parse_out(f"otlp={otlp.url}"), "shop", cpu_limit_percent=100.0)
    for second in range(1, 5):
        push.update(synthetic_second(second, 10 * second))
    report = push.close()
    assert (
        report["pushed"] + report["failed"] == 4
        and report["failed"] >= 1
        and report["pushed"] == len(otlp.received) >= 1
    )
    assert report["last_error"] is not None and "slower than a push a second" in report["last_error"]
    # The counters of the seconds that waited went with the last push.
    assert int(otlp.points(len(otlp.received) - 1, "horde_requests_total")[0]["asInt"]) == 10 + 20 + 30 + 40


def test_a_refused_push_is_not_tried_again_and_is_counted(otlp: OtlpReceiver) -> None:
    otlp.status = 400
    push = PushSink(parse_out(f"otlp={otlp.url}"), "shop", cpu_limit_percent=100.0)
    warnings: list[str] = []
    push.on_warning = warnings.append
    push.update(synthetic_second(1, 2))
    report = push.close()
    assert len(otlp.received) == 1, "a 400 says the data is refused: no second try"
    assert (report["pushed"], report["failed"], report["last_error"]) == (0, 1, "HTTP 400: bad data point")
    # Series as a scrape counts them: a histogram's are its buckets, its _sum and its _count.
    metrics = otlp.received[0].body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    series = sum(
        len(point["bucketCounts"]) + 2 if "histogram" in metric else 1
        for metric in metrics
        for point in (metric.get("sum") or metric.get("gauge") or metric.get("histogram"))["dataPoints"]
    )
    assert report["series_not_sent"] == series
    assert warnings and "HTTP 400" in warnings[0]


def test_tags_become_labels_that_never_take_a_horde_label() -> None:
    assert run_labels("r1", "shop", {"build": "7", "step": "x", "git.sha": "abc", "1st": "y", "__name__": "z"}) == [
        ("run", "r1"),
        ("plan", "shop"),
        ("tag_1st", "y"),
        ("tag___name__", "z"),
        ("build", "7"),
        ("git_sha", "abc"),
        ("tag_step", "x"),
    ]
    # The scrape endpoint carries them too.
    exporter = PrometheusExporter("r1", "shop", cpu_limit_percent=100.0, tags={"build": "7"})
    exporter.update(synthetic_second(1, 2))
    assert (
        'horde_requests_total{build="7",plan="shop",run="r1",scenario="s",step="home",step_kind="request"} 2.0'
        in exporter.render()
    )


def test_bad_out_flags_are_refused_with_a_hint_and_no_password(horde_cli: Any) -> None:
    result = horde_cli.run(
        "run", "--url", "http://127.0.0.1:9/", "--duration", "1s", "--out", "otlp=http://me:s3cret@127.0.0.1:x"
    )
    assert result.returncode == ExitCode.INVALID_INPUT, result.stderr
    assert "--out otlp: 'http://…@127.0.0.1:x' has no valid port" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr + result.stdout
    for flag, message in (
        ("graphite=http://127.0.0.1:2003", "is not KIND=URL with KIND one of prometheus-rw, otlp"),
        ("prometheus-rw", "is not KIND=URL"),
        ("otlp=127.0.0.1:4318", "is not an http:// or https:// URL"),
        ("otlp=ftp://127.0.0.1/", "is not an http:// or https:// URL"),
    ):
        with pytest.raises(InvalidInput, match="^--out") as refused:
            parse_out(flag)
        assert message in str(refused.value) and refused.value.hint and "--out otlp=" in refused.value.hint


def test_a_password_in_the_url_is_basic_authentication_never_shown() -> None:
    target = parse_out("prometheus-rw=https://team:s3cret@metrics.example/api/v1/push")
    assert target.url == target.shown == "https://metrics.example/api/v1/push"
    assert target.authorization == "Basic dGVhbTpzM2NyZXQ="  # base64 of team:s3cret


# --- a cluster: the merged run, pushed once ---------------------------------------------------------


def _generator_snapshots(port: int, path: str, vus: int) -> list[Snapshot]:
    plan = plan_from_dict(
        {
            "version": 1,
            "name": "spread",
            "target": {"base_url": f"http://127.0.0.1:{port}"},
            "scenarios": [
                {
                    "name": "s",
                    "steps": [{"name": "r", "method": "GET", "path": path}],
                    "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": 2, "vus": vus}]},
                }
            ],
        }
    )
    with Run.start(plan, workers=1) as run:
        return list(run)


def _percentile_of(blobs: list[bytes], percentile: float) -> float:
    """The percentile of several histograms' latencies together, in seconds, read off their
    buckets here (each bucket's highest value, as HDR reports): the known answer."""
    values = sorted((bucket.highest_us, bucket.count) for blob in blobs for bucket in histogram.buckets(blob))
    rank = math.ceil(percentile / 100 * sum(count for _, count in values))
    seen = 0
    for value_us, count in values:
        seen += count
        if seen >= rank:
            return value_us / 1_000_000
    raise AssertionError("no latencies")


def test_the_merged_run_is_pushed_with_percentiles_of_the_exact_merge(builtin_target: Any, otlp: OtlpReceiver) -> None:
    # Two generators' real seconds: one fast and busy, one slow, so that an average of their
    # percentiles is far from the percentile of their requests together.
    fast = _generator_snapshots(builtin_target.port, "/delay/1", 2)
    slow = _generator_snapshots(builtin_target.port, "/delay/40", 1)
    seconds = min(len(fast), len(slow))
    merged = [merge_seconds([fast[index], slow[index]], final=index == seconds - 1) for index in range(seconds)]
    push = PushSink(parse_out(f"otlp={otlp.url}"), "spread", cpu_limit_percent=1000.0)
    push.set_run_id("cluster-run")
    for index, second in enumerate(merged):
        push.update(second)
        # One push a second, as in a run: seconds queued faster would go out together.
        deadline = time.monotonic() + 10
        while len(otlp.received) <= index and time.monotonic() < deadline:
            time.sleep(0.01)
    report = push.close()
    assert report["failed"] == 0 and report["pushed"] == seconds == len(otlp.received)

    # The last full second's p99 of all requests: that of both generators' latencies together.
    last_full = seconds - 2
    assert not merged[last_full]["final"]
    blobs = [generator[last_full]["steps"][0]["histogram"] for generator in (fast, slow)]
    p99 = [
        point
        for point in otlp.points(last_full, "horde_latency_quantile_seconds")
        if point["labels"]["quantile"] == "0.99"
    ]
    exact = _percentile_of(blobs, 99.0)
    assert len(p99) == 1 and p99[0]["asDouble"] == pytest.approx(exact, rel=0.002)
    averaged = sum(_percentile_of([blob], 99.0) for blob in blobs) / 2
    assert abs(p99[0]["asDouble"] - averaged) > 0.1 * averaged, "not an average of the generators' percentiles"
    # The counters are the two generators' sums.
    requests = otlp.points(seconds - 1, "horde_requests_total")
    assert int(requests[0]["asInt"]) == sum(
        entry["requests"] for generator in (fast, slow) for second in generator[:seconds] for entry in second["steps"]
    )


def test_a_cluster_run_is_pushed_by_the_coordinator_alone(
    builtin_target: Any, otlp: OtlpReceiver, horde_cli: Any, tmp_path: Path
) -> None:
    from ray_cluster import ray_or_skip

    ray_or_skip()
    summary_path = tmp_path / "summary.json"
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{builtin_target.port}/",
        "--vus",
        "4",
        "--duration",
        "2s",
        "--cluster",
        "local",
        "--generators",
        "2",
        "--summary-json",
        str(summary_path),
        "--out",
        f"otlp={otlp.url}",
        timeout=180,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    summary = json.loads(summary_path.read_text())
    assert len(summary["cluster"]["generators"]) == 2
    # One stream of seconds (two generators pushing would double it), ending at the stored total.
    assert len(otlp.received) == summary["outputs"][0]["pushed"] <= 4
    requests = otlp.points(len(otlp.received) - 1, "horde_requests_total")
    assert len(requests) == 1 and int(requests[0]["asInt"]) == stored(horde_cli, summary["run_id"])["requests"]
