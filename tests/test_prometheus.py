"""The Prometheus exposition (horde.sinks.prometheus) scraped over HTTP and read by a strict parser of
the text format 0.0.4, against synthetic snapshots of known latencies and a real run of the
built-in target; and the Grafana dashboard checked against the names the exporter serves."""

from __future__ import annotations

import errno
import json
import math
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import horde.sinks.prometheus
from horde.engine import histogram
from horde.errors import HordeError
from horde.sinks.prometheus import LATENCY_BUCKETS_S, PrometheusEndpointUnavailable, PrometheusExporter
from horde.plan import plan_from_dict
from horde.engine.run import Run, Snapshot
from synthetic import entry

DASHBOARD = Path(__file__).resolve().parents[1] / "examples" / "grafana" / "horde-dashboard.json"
ODD_NAME = 'odd "name" \\ with\nnewline'


# --- a strict parser of the text exposition format 0.0.4 -----------------------------------------

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class FormatError(AssertionError):
    pass


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Family:
    name: str
    type: str
    help: str | None = None
    samples: list[Sample] = field(default_factory=list)

    def find(self, name: str | None = None, **labels: str) -> list[Sample]:
        return [
            s
            for s in self.samples
            if (name is None or s.name == name) and all(s.labels.get(key) == value for key, value in labels.items())
        ]

    def one(self, name: str | None = None, **labels: str) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, (self.name, name, labels, found)
        return found[0].value


def parse_exposition(text: str) -> dict[str, Family]:
    """Every family of an exposition; raises FormatError on anything the format does not allow
    (and on the few things it allows that Horde never writes: blank lines, other comments)."""
    if not text.endswith("\n"):
        raise FormatError("the exposition must end with a line feed")
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    current: Family | None = None
    closed_families: set[str] = set()
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for number, line in enumerate(text[:-1].split("\n"), start=1):
        where = f"line {number}: {line!r}"
        if line.startswith("#"):
            match = re.fullmatch(r"# (HELP|TYPE) (\S+) (.*)", line)
            if not match or not _METRIC_NAME.fullmatch(match.group(2)):
                raise FormatError(f"{where}: not a HELP or TYPE line")
            keyword, name, rest = match.groups()
            if name in closed_families or (current is not None and current.name != name and name in families):
                raise FormatError(f"{where}: {name} appears in two places")
            if keyword == "HELP":
                if name in helps:
                    raise FormatError(f"{where}: a second HELP for {name}")
                helps[name] = _unescape(rest, quote=False, where=where)
                if name in families:
                    families[name].help = helps[name]
            else:
                if name in families:
                    raise FormatError(f"{where}: TYPE for {name} after its samples or a second TYPE")
                if rest not in _TYPES:
                    raise FormatError(f"{where}: unknown type {rest}")
                if rest == "counter" and not name.endswith("_total"):
                    raise FormatError(f"{where}: a counter's name ends in _total")
                if current is not None and current.name != name:
                    closed_families.add(current.name)
                current = families[name] = Family(name, rest, helps.get(name))
            continue
        if not line:
            raise FormatError(f"{where}: a blank line")
        sample = _parse_sample(line, where)
        if current is None or not _belongs(sample.name, current):
            raise FormatError(f"{where}: a sample outside its family's block (or without a TYPE)")
        identity = (sample.name, tuple(sorted(sample.labels.items())))
        if identity in seen:
            raise FormatError(f"{where}: a repeated series")
        seen.add(identity)
        if "le" in sample.labels and not sample.name.endswith("_bucket"):
            raise FormatError(f"{where}: le belongs to histogram buckets")
        current.samples.append(sample)
    for family in families.values():
        if family.help is None:
            raise FormatError(f"{family.name} has no HELP")
        if family.type == "histogram":
            _check_histogram(family)
    return families


def _belongs(sample_name: str, family: Family) -> bool:
    suffixes = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}.get(family.type, ("",))
    return any(sample_name == family.name + suffix for suffix in suffixes)


def _parse_sample(line: str, where: str) -> Sample:
    match = _METRIC_NAME.match(line)
    if not match:
        raise FormatError(f"{where}: no metric name")
    name, position = match.group(0), match.end()
    labels: dict[str, str] = {}
    if line[position : position + 1] == "{":
        position += 1
        while line[position : position + 1] != "}":
            label = _LABEL_NAME.match(line, position)
            if not label or label.group(0).startswith("__"):
                raise FormatError(f"{where}: a bad label name at {position}")
            position = label.end()
            if line[position : position + 2] != '="':
                raise FormatError(f"{where}: expected =\" at {position}")
            position += 2
            value_start = position
            while True:
                if position >= len(line):
                    raise FormatError(f"{where}: an unterminated label value")
                if line[position] == "\\":
                    position += 2
                elif line[position] == '"':
                    break
                else:
                    position += 1
            if label.group(0) in labels:
                raise FormatError(f"{where}: label {label.group(0)} twice")
            labels[label.group(0)] = _unescape(line[value_start:position], quote=True, where=where)
            position += 1
            if line[position : position + 1] == ",":
                position += 1
            elif line[position : position + 1] != "}":
                raise FormatError(f"{where}: expected , or }} at {position}")
        position += 1
    fields = line[position:].split(" ")
    if fields[0] != "" or len(fields) not in (2, 3):
        raise FormatError(f"{where}: expected one space, a value and an optional timestamp")
    return Sample(name, labels, _float(fields[1], where))


def _unescape(text: str, *, quote: bool, where: str) -> str:
    escapes = {"\\": "\\", "n": "\n", **({'"': '"'} if quote else {})}
    out: list[str] = []
    position = 0
    while position < len(text):
        character = text[position]
        if character == "\\":
            following = text[position + 1 : position + 2]
            if following not in escapes:
                raise FormatError(f"{where}: the escape \\{following} is not allowed")
            out.append(escapes[following])
            position += 2
            continue
        if character == "\n" or (quote and character == '"'):
            raise FormatError(f"{where}: an unescaped {character!r}")
        out.append(character)
        position += 1
    return "".join(out)


def _float(text: str, where: str) -> float:
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not _NUMBER.fullmatch(text):
        raise FormatError(f"{where}: {text!r} is not a number")
    return float(text)


def _check_histogram(family: Family) -> None:
    series: dict[tuple[tuple[str, str], ...], list[Sample]] = {}
    for sample in family.samples:
        key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
        series.setdefault(key, []).append(sample)
    for key, samples in series.items():
        buckets = [s for s in samples if s.name.endswith("_bucket")]
        bounds = [_float(s.labels["le"], family.name) for s in buckets]
        if not buckets or bounds[-1] != math.inf:
            raise FormatError(f"{family.name}{dict(key)}: no +Inf bucket last")
        if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
            raise FormatError(f"{family.name}{dict(key)}: buckets out of order")
        counts = [s.value for s in buckets]
        if counts != sorted(counts):
            raise FormatError(f"{family.name}{dict(key)}: buckets not cumulative")
        (count,) = [s.value for s in samples if s.name.endswith("_count")]
        if count != counts[-1]:
            raise FormatError(f"{family.name}{dict(key)}: _count differs from the +Inf bucket")
        if len([s for s in samples if s.name.endswith("_sum")]) != 1:
            raise FormatError(f"{family.name}{dict(key)}: no _sum")


def test_the_parser_refuses_what_the_format_does_not_allow() -> None:
    good = '# HELP a_total x\n# TYPE a_total counter\na_total{s="q\\"\\\\\\n"} 1\n'
    assert parse_exposition(good)["a_total"].samples[0].labels == {"s": 'q"\\\n'}
    for bad in (
        good[:-1],  # no final line feed
        good.replace("a_total{", "a{"),  # sample outside its family
        good.replace('\\"', '"'),  # unescaped quote
        good.replace("\\n", "\\t"),  # an escape that does not exist
        good.replace("counter", "counters"),
        good.replace("a_total", "a"),  # a counter without _total
        good + 'a_total{s="q\\"\\\\\\n"} 2\n',  # a repeated series
        good + "# TYPE b gauge\nb 1\na_total 3\n",  # a family in two places
        good.replace(" 1\n", " one\n"),
        "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"1.0\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\n# HELP h x\nh_bucket{le=\"1.0\"} 1\nh_sum 1\nh_count 1\n",
    ):
        with pytest.raises(FormatError):
            parse_exposition(bad)


# --- helpers ---------------------------------------------------------------------------------


def scrape(exporter: PrometheusExporter, path: str = "/metrics") -> tuple[str, str]:
    """The body and Content-Type of a GET over HTTP."""
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}{path}", timeout=10) as response:
        return response.read().decode("utf-8"), response.headers["Content-Type"]


def families_of(exporter: PrometheusExporter) -> dict[str, Family]:
    body, content_type = scrape(exporter)
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    return parse_exposition(body)


@pytest.fixture
def exporter() -> Iterator[PrometheusExporter]:
    with PrometheusExporter("run-1", "shop plan", cpu_limit_percent=90.0) as started:
        yield started


def snapshot(
    second: int, steps: list[dict[str, Any]], *, final: bool = False, interval_s: float = 1.0, **overrides: Any
) -> Snapshot:
    base: Snapshot = {
        "second": second,
        "elapsed_s": second - 1 + interval_s,
        "interval_s": interval_s,
        "timestamp": 1_763_819_000.0 + second,
        "final": final,
        "steps": steps,
        "active_vus": 4,
        "peak_vus": 4,
        "busy_vus": 3,
        "iterations": 7,
        "dropped_arrivals": 2,
        "connections_opened": 1,
        "target_vus": 4,
        "target_rate_per_s": None,
        "cpu_percent": 20.0,
        "timer_lateness_p99_ms": 0.5,
    }
    return {**base, **overrides}


def latencies(seed: int, count: int) -> list[int]:
    """Latencies in microseconds spread from ~0.2 ms to over a minute, none within HDR's
    resolution (0.1 %) above a bucket bound, where the bucket it counts under is not exact."""
    rng = random.Random(seed)
    bounds_us = [round(bound * 1_000_000) for bound in LATENCY_BUCKETS_S]
    values: list[int] = []
    while len(values) < count:
        value = max(1, int(rng.lognormvariate(9.5, 2.0)))
        if not any(bound < value <= bound * 1.002 for bound in bounds_us):
            values.append(value)
    return values + bounds_us[:3] + [75_000_000]  # exactly on a bound counts under it; one over 60 s


# --- synthetic snapshots of known latencies --------------------------------------------------


def test_counters_quantiles_and_buckets_match_the_snapshots(exporter: PrometheusExporter) -> None:
    home_1, home_2, home_final = latencies(1, 300), latencies(2, 500), latencies(3, 20)
    odd_1, odd_2 = latencies(4, 100), latencies(5, 50)
    snapshots = [
        snapshot(
            1,
            [
                entry("home", home_1, errors={"timeout": 3, "status_503": 1}),
                entry(ODD_NAME, odd_1, scenario="odd"),
                entry("login", [1000, 2000], scenario="auth"),
                entry("visit", [5000, 6000], kind="group", errors={"step_failed": 1}),
            ],
        ),
        snapshot(
            2,
            [
                entry("home", home_2, errors={"timeout": 2}),
                entry(ODD_NAME, odd_2, scenario="odd"),
                entry("visit", [7000], kind="group"),
            ],
            cpu_percent=95.0,
            timer_lateness_p99_ms=1.5,
            iterations=11,
        ),
        # The drain: counters move, the last full second's figures stay.
        snapshot(
            3,
            [entry("home", home_final, errors={"reset": 1})],
            final=True,
            interval_s=0.004,
            active_vus=0,
            busy_vus=0,
            cpu_percent=3.0,
            timer_lateness_p99_ms=40.0,
        ),
    ]
    for one in snapshots:
        exporter.update(one)
    families = families_of(exporter)

    for family in families.values():
        for sample in family.samples:
            assert sample.labels["run"] == "run-1" and sample.labels["plan"] == "shop plan"

    home = {"scenario": "shop", "step": "home", "step_kind": "request"}
    odd = {"scenario": "odd", "step": ODD_NAME, "step_kind": "request"}
    visit = {"scenario": "shop", "step": "visit", "step_kind": "group"}
    # Counters: the sums of every snapshot, the final one included.
    for labels in (home, odd, visit):
        entries = [e for s in snapshots for e in s["steps"] if e["step"] == labels["step"]]
        assert families["horde_requests_total"].one(**labels) == sum(e["requests"] for e in entries)
        assert families["horde_ok_responses_total"].one(**labels) == sum(e["ok"] for e in entries)
    assert families["horde_requests_total"].one(**home) == len(home_1) + len(home_2) + len(home_final)
    errors = families["horde_errors_total"]
    assert {s.labels["kind"]: s.value for s in errors.find(**home)} == {"timeout": 5, "status_503": 1, "reset": 1}
    assert errors.one(**visit) == 1 and not errors.find(**odd)
    assert families["horde_iterations_total"].one() == 7 + 11 + 7
    assert families["horde_dropped_arrivals_total"].one() == 6
    assert families["horde_connections_opened_total"].one() == 3

    # The histogram: cumulative counts of the known latencies at each bound; _count = requests.
    buckets = families["horde_step_latency_seconds"]
    every_home = home_1 + home_2 + home_final
    for bound in LATENCY_BUCKETS_S:
        expected = sum(1 for value in every_home if value <= bound * 1_000_000)
        assert buckets.one("horde_step_latency_seconds_bucket", le=repr(bound), **home) == expected, bound
    assert buckets.one("horde_step_latency_seconds_bucket", le="+Inf", **home) == len(every_home)
    for labels in (home, odd, visit):
        assert buckets.one("horde_step_latency_seconds_count", **labels) == families["horde_requests_total"].one(
            **labels
        )
    assert buckets.one("horde_step_latency_seconds_sum", **home) == pytest.approx(sum(every_home) / 1e6, rel=1e-3)
    assert any(value > 60_000_000 for value in every_home)  # the +Inf bucket is exercised

    # The last full second: exact per-second quantiles of second 2, not of the drain.
    quantiles = families["horde_step_latency_quantile_seconds"]
    second = snapshots[1]
    for step_entry in second["steps"]:
        stats = histogram.stats(step_entry["histogram"], (50.0, 90.0, 95.0, 99.0))
        labels = {"step": step_entry["step"], "step_kind": step_entry["kind"]}
        for label, percentile in (("0.5", 50.0), ("0.9", 90.0), ("0.95", 95.0), ("0.99", 99.0)):
            assert quantiles.one(quantile=label, **labels) == pytest.approx(
                stats.percentile(percentile) / 1000, rel=1e-12
            )
        assert quantiles.one(quantile="1", **labels) == pytest.approx(stats.max_ms / 1000, rel=1e-12)
    assert not quantiles.find(step="login")  # no requests in the last full second: no quantile
    overall = histogram.stats(histogram.merge(e["histogram"] for e in second["steps"] if e["kind"] == "request"))
    assert families["horde_latency_quantile_seconds"].one(quantile="0.99") == pytest.approx(
        overall.percentile(99.0) / 1000
    )
    assert families["horde_latency_quantile_seconds"].one(quantile="0.5") == pytest.approx(
        overall.percentile(50.0) / 1000
    )

    rates = families["horde_step_requests_per_second"]
    assert rates.one(**home) == len(home_2) and rates.one(step="login") == 0
    assert families["horde_generator_cpu_percent"].one() == 95.0
    assert families["horde_timer_lateness_p99_seconds"].one() == pytest.approx(0.0015)
    assert families["horde_generator_saturated"].one() == 1  # 95 % over the 90 % limit
    # The state gauges follow the final snapshot.
    assert families["horde_active_vus"].one() == 0 and families["horde_target_vus"].one() == 4
    assert not families["horde_target_rate_per_second"].samples  # closed model
    assert families["horde_run_finished"].one() == 1


def test_buckets_stay_exact_when_nobody_scrapes_for_long(
    exporter: PrometheusExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the limit, the queued histograms are merged one per step (memory stays bounded).
    monkeypatch.setattr(horde.sinks.prometheus, "_PENDING_LIMIT", 3)
    seconds = [latencies(10 + second, 40) for second in range(1, 11)]
    for second, values in enumerate(seconds, start=1):
        exporter.update(snapshot(second, [entry("home", values), entry("login", values[:5])]))
    assert len(exporter._pending) <= 4
    families = families_of(exporter)
    every = [value for values in seconds for value in values]
    buckets = families["horde_step_latency_seconds"]
    for bound in LATENCY_BUCKETS_S:
        assert buckets.one("horde_step_latency_seconds_bucket", step="home", le=repr(bound)) == sum(
            1 for value in every if value <= bound * 1_000_000
        )
    assert buckets.one("horde_step_latency_seconds_count", step="home") == len(every)
    assert buckets.one("horde_step_latency_seconds_count", step="login") == 50
    # A second scrape with nothing new shows the same buckets (they are folded once).
    assert parse_exposition(scrape(exporter)[0])["horde_step_latency_seconds"].samples == buckets.samples


def test_step_names_are_escaped_in_the_text(exporter: PrometheusExporter) -> None:
    exporter.update(snapshot(1, [entry(ODD_NAME, [1000])]))
    body, _ = scrape(exporter)
    assert 'step="odd \\"name\\" \\\\ with\\nnewline"' in body
    assert "\nnewline" not in body
    assert parse_exposition(body)["horde_requests_total"].find(step=ODD_NAME)


def test_open_model_gauges_and_saturation_by_lateness(exporter: PrometheusExporter) -> None:
    exporter.update(snapshot(1, [entry("home", [2000])], target_rate_per_s=250.5))
    exporter.update(snapshot(2, [entry("home", [2000])], target_rate_per_s=250.5, timer_lateness_p99_ms=12.0))
    families = families_of(exporter)
    assert families["horde_target_rate_per_second"].one() == 250.5
    # Lateness over its 10 ms limit with little CPU used: starved, not saturated.
    assert families["horde_generator_saturated"].one() == 0 and families["horde_generator_starved"].one() == 1
    exporter.update(
        snapshot(
            3,
            [entry("home", [2000])],
            target_rate_per_s=250.5,
            timer_lateness_p99_ms=12.0,
            cpu_percent=0.9 * exporter.cpu_limit_percent,
        )
    )
    families = families_of(exporter)
    assert families["horde_generator_saturated"].one() == 1 and families["horde_generator_starved"].one() == 0
    exporter.update(snapshot(4, [entry("home", [2000])], target_rate_per_s=300.0))
    families = families_of(exporter)
    assert families["horde_generator_saturated"].one() == 0
    assert families["horde_run_finished"].one() == 0


def test_before_any_snapshot_the_exposition_is_valid_and_empty(exporter: PrometheusExporter) -> None:
    families = families_of(exporter)
    assert families["horde_requests_total"].type == "counter" and not families["horde_requests_total"].samples
    assert families["horde_step_latency_seconds"].type == "histogram"
    assert families["horde_latency_quantile_seconds"].type == "gauge"
    assert families["horde_run_finished"].one() == 0
    assert all(name.startswith("horde_") for name in families)


def test_set_run_id_relabels_the_series(exporter: PrometheusExporter) -> None:
    exporter.set_run_id("run-2")
    exporter.update(snapshot(1, [entry("home", [1000])]))
    assert families_of(exporter)["horde_requests_total"].one(run="run-2") == 1


# --- a real run --------------------------------------------------------------------------------


def test_a_real_run_scraped_while_it_goes(builtin_target: Any) -> None:
    plan = plan_from_dict(
        {
            "version": 1,
            "name": "scraped",
            "target": {"base_url": f"http://127.0.0.1:{builtin_target.port}"},
            "scenarios": [
                {
                    "name": "s",
                    "steps": [
                        {"name": "r", "method": "GET", "path": "/delay/5"},
                        {"name": "fail", "method": "GET", "path": "/status/503"},
                    ],
                    "workload": {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 2, "vus": 2}]},
                }
            ],
            "graceful_stop_s": 2,
        }
    )
    recorded: list[Snapshot] = []
    scraped_during: list[dict[str, Family]] = []
    with PrometheusExporter("real", plan.name, cpu_limit_percent=1000.0) as exporter:
        deadline = time.monotonic() + 30
        with Run.start(plan, workers=1) as run:
            for one in run:
                recorded.append(one)
                exporter.update(one)
                if not one["final"]:
                    scraped_during.append(families_of(exporter))
                assert time.monotonic() < deadline
        body, _ = scrape(exporter)
        time.sleep(0.2)
        assert scrape(exporter)[0] == body  # the final values stay served until stop()
    families = parse_exposition(body)
    assert scraped_during and families["horde_run_finished"].one() == 1
    assert scraped_during[-1]["horde_run_finished"].one() == 0

    for step in ("r", "fail"):
        entries = [e for s in recorded for e in s["steps"] if e["step"] == step]
        requests = sum(e["requests"] for e in entries)
        assert requests > 0
        assert families["horde_requests_total"].one(step=step) == requests
        assert families["horde_ok_responses_total"].one(step=step) == sum(e["ok"] for e in entries)
        assert families["horde_step_latency_seconds"].one("horde_step_latency_seconds_count", step=step) == requests
        assert families["horde_sent_bytes_total"].one(step=step) == sum(e["bytes_sent"] for e in entries)
        assert families["horde_received_bytes_total"].one(step=step) == sum(e["bytes_received"] for e in entries)
    assert families["horde_errors_total"].one(step="fail", kind="status_503") == families["horde_requests_total"].one(
        step="fail"
    )
    assert families["horde_iterations_total"].one() == sum(s["iterations"] for s in recorded)
    assert families["horde_connections_opened_total"].one() == sum(s["connections_opened"] for s in recorded) > 0

    last_full = [s for s in recorded if not s["final"]][-1]
    for step_entry in last_full["steps"]:
        stats = histogram.stats(step_entry["histogram"])
        assert families["horde_step_latency_quantile_seconds"].one(
            step=step_entry["step"], quantile="0.95"
        ) == pytest.approx(stats.percentile(95.0) / 1000, rel=1e-12)
        assert families["horde_step_requests_per_second"].one(step=step_entry["step"]) == pytest.approx(
            step_entry["requests"] / last_full["interval_s"]
        )
    assert families["horde_generator_cpu_percent"].one() == pytest.approx(last_full["cpu_percent"])
    assert families["horde_step_latency_quantile_seconds"].one(step="r", quantile="0.5") >= 0.005  # /delay/5


def test_update_never_waits_for_a_scrape(exporter: PrometheusExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    # A scrape held up in its costly part (decoding histograms into buckets) must not hold up
    # the run loop's update().
    decoding, release = threading.Event(), threading.Event()
    real_buckets = horde.sinks.prometheus.buckets

    def slow_buckets(blob: bytes) -> Any:
        decoding.set()
        release.wait(10)
        return real_buckets(blob)

    monkeypatch.setattr(horde.sinks.prometheus, "buckets", slow_buckets)
    exporter.update(snapshot(1, [entry("home", [1000])]))
    scraped: list[str] = []
    scraper = threading.Thread(target=lambda: scraped.append(scrape(exporter)[0]))
    scraper.start()
    try:
        assert decoding.wait(10)
        updater = threading.Thread(target=exporter.update, args=(snapshot(2, [entry("home", [1000, 2000])]),))
        updater.start()
        updater.join(5)
        assert not updater.is_alive(), "update() waited for the scrape"
    finally:
        release.set()
        scraper.join(10)
    # Each scrape is consistent: the state it began with, and _count equal to requests_total.
    first = parse_exposition(scraped[0])
    assert first["horde_requests_total"].one() == 1
    assert first["horde_step_latency_seconds"].one("horde_step_latency_seconds_count") == 1
    assert families_of(exporter)["horde_step_latency_seconds"].one("horde_step_latency_seconds_count") == 3


# --- HTTP, ports -------------------------------------------------------------------------------


def test_http_paths(exporter: PrometheusExporter) -> None:
    assert exporter.url == f"http://127.0.0.1:{exporter.port}/metrics"
    assert exporter.port > 0
    assert "/metrics" in scrape(exporter, "/")[0]
    with pytest.raises(urllib.error.HTTPError) as caught:
        scrape(exporter, "/nothing")
    assert caught.value.code == 404
    request = urllib.request.Request(exporter.url, method="HEAD")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and response.read() == b""
        assert int(response.headers["Content-Length"]) > 0


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        exporter = PrometheusExporter("r", "p", cpu_limit_percent=90.0, port=port)
        with pytest.raises(PrometheusEndpointUnavailable) as caught:
            exporter.start()
    error = caught.value
    assert isinstance(error, HordeError) and error.exit_code == 2
    assert f"127.0.0.1:{port}" in error.message and "already in use" in error.message
    assert error.hint is not None and "--prometheus" in error.hint
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.EADDRINUSE


def test_a_second_exporter_on_the_same_port_is_refused(exporter: PrometheusExporter) -> None:
    with pytest.raises(PrometheusEndpointUnavailable, match="already in use"):
        PrometheusExporter("r", "p", cpu_limit_percent=90.0, port=exporter.port).start()


def test_an_address_not_of_this_machine_is_a_clear_error() -> None:
    with pytest.raises(PrometheusEndpointUnavailable) as caught:
        PrometheusExporter("r", "p", cpu_limit_percent=90.0, host="192.0.2.1").start()  # TEST-NET-1
    assert caught.value.hint


def test_stop_frees_the_port() -> None:
    exporter = PrometheusExporter("r", "p", cpu_limit_percent=90.0)
    exporter.start()
    port = exporter.port
    scrape(exporter)
    exporter.stop()
    exporter.stop()  # twice is harmless
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    # The port can be listened on again (as a server does: the scrape's TIME_WAIT is no obstacle).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()
    with PrometheusExporter("r", "p", cpu_limit_percent=90.0, port=port) as second:
        assert second.port == port and families_of(second)


# --- the Grafana dashboard ---------------------------------------------------------------------


def _expressions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition", "query") and isinstance(value, str):
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item)


def served_names_and_labels(exporter: PrometheusExporter) -> tuple[set[str], set[str]]:
    exporter.update(snapshot(1, [entry("home", [1000], errors={"timeout": 1})], target_rate_per_s=5.0))
    families = families_of(exporter)
    names = {sample.name for family in families.values() for sample in family.samples} | set(families)
    labels = {label for family in families.values() for sample in family.samples for label in sample.labels}
    return names, labels


def test_the_dashboard_uses_only_series_the_exporter_serves(exporter: PrometheusExporter) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    served, labels = served_names_and_labels(exporter)
    expressions = list(_expressions(dashboard))
    used = {name for expression in expressions for name in re.findall(r"\bhorde_[a-zA-Z0-9_]+", expression)}
    assert used and used <= served, used - served
    assert {
        "horde_requests_total",
        "horde_errors_total",
        "horde_step_latency_quantile_seconds",
        "horde_latency_quantile_seconds",
        "horde_step_latency_seconds_bucket",
        "horde_active_vus",
        "horde_target_vus",
        "horde_target_rate_per_second",
        "horde_dropped_arrivals_total",
        "horde_generator_cpu_percent",
        "horde_timer_lateness_p99_seconds",
        "horde_generator_saturated",
    } <= used
    for expression in expressions:
        matchers = re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"", expression)
        grouped = [
            label.strip() for group in re.findall(r"\bby\s*\(([^)]*)\)", expression) for label in group.split(",")
        ]
        assert set(matchers) | set(grouped) <= labels, (expression, set(matchers) | set(grouped) - labels)
    assert any("histogram_quantile(0.95" in expression for expression in expressions)


def test_the_dashboard_imports_with_a_datasource_input_and_variables() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["schemaVersion"] >= 36
    assert [item["name"] for item in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert set(variables) == {"run", "step"}
    for variable in variables.values():
        assert variable["definition"] == variable["query"] and variable["query"].startswith("label_values(")
        assert variable["datasource"]["uid"] == "${DS_PROMETHEUS}"
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert panel["targets"] and all(
            target["datasource"]["uid"] == "${DS_PROMETHEUS}" for target in panel["targets"]
        )
        assert all('run="$run"' in target["expr"] for target in panel["targets"]), panel["title"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24


def test_message_steps_count_their_messages_by_direction() -> None:
    from horde._engine import histogram_from_values
    from horde.sinks.prometheus import PrometheusExporter

    exporter = PrometheusExporter("r1", "gateway", cpu_limit_percent=90.0)
    counts = {"sent": 3, "received": 2, "datagrams_sent": 3, "datagrams_received": 2, "late": 1, "retransmitted": 4}
    entry = {
        "scenario": "s",
        "step": "rtt",
        "kind": "request",
        "requests": 3,
        "ok": 2,
        "errors": {"lost": 1},
        "bytes_sent": 30,
        "bytes_received": 20,
        "histogram": histogram_from_values([1000, 2000]),
        "messages": counts,
    }
    http = {**entry, "step": "home", "messages": None}
    http.pop("messages")
    base = {
        "elapsed_s": 1.0,
        "interval_s": 1.0,
        "final": False,
        "active_vus": 1,
        "busy_vus": 1,
        "iterations": 1,
        "dropped_arrivals": 0,
        "connections_opened": 1,
        "target_vus": 1,
        "target_rate_per_s": None,
        "cpu_percent": 1.0,
        "timer_lateness_p99_ms": 0.1,
    }
    for second in (1, 2):
        exporter.update({**base, "second": second, "steps": [entry, http]})
    messages = parse_exposition(exporter.render())["horde_messages_total"]
    assert len(messages.samples) == len(counts), "the HTTP step has no message series"
    for counter, value in counts.items():
        assert messages.one(step="rtt", step_kind="request", counter=counter) == 2 * value, counter
