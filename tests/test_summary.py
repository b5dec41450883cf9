"""The summary is exact: its percentiles are those of the merge of every per-second histogram,
its totals the sums of the snapshots; and its naming and generator figures follow the rules."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, NotRequired, TypedDict

import pytest

from horde.engine import histogram
from typed_dicts import conforms
from horde.plan import plan_from_dict
from horde.engine.run import Run, Snapshot
from horde.results.summary import (
    CPU_SATURATION_PERCENT_PER_WORKER,
    TIMER_LATENESS_LIMIT_MS,
    Summary,
    SummaryBuilder,
    generator_state,
    is_generator_saturated,
    step_key,
    summarise,
)

LATENCY_KEYS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


@pytest.fixture(scope="module")
def two_scenario_snapshots(builtin_target: Any) -> list[Snapshot]:
    """A real 2 s run: scenarios 'a' and 'b' both have a step 'home'; 'a' also gets 503s."""
    plan = plan_from_dict(
        {
            "version": 1,
            "name": "exact",
            "target": {"base_url": f"http://127.0.0.1:{builtin_target.port}"},
            "scenarios": [
                {
                    "name": "a",
                    "steps": [
                        {"name": "home", "method": "GET", "path": "/delay/1"},
                        {"name": "only_a", "method": "GET", "path": "/status/503"},
                    ],
                    "workload": {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 2, "vus": 2}]},
                },
                {
                    "name": "b",
                    "steps": [{"name": "home", "method": "GET", "path": "/delay/10"}],
                    "workload": {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 2, "vus": 1}]},
                },
            ],
            "graceful_stop_s": 2,
        }
    )
    deadline = time.monotonic() + 30
    snapshots = []
    with Run.start(plan, workers=1) as run:
        for snapshot in run:
            snapshots.append(snapshot)
            assert time.monotonic() < deadline
    return snapshots


def _entries(snapshots: list[Snapshot], scenario: str | None = None, step: str | None = None) -> list[dict[str, Any]]:
    return [
        entry
        for snapshot in snapshots
        for entry in snapshot["steps"]
        if (scenario is None or entry["scenario"] == scenario) and (step is None or entry["step"] == step)
    ]


def _expected_figures(entries: list[dict[str, Any]]) -> tuple[int, int, dict[str, int], histogram.LatencyStats]:
    requests = sum(e["requests"] for e in entries)
    errors = requests - sum(e["ok"] for e in entries)
    kinds: Counter[str] = Counter()
    for entry in entries:
        kinds.update(entry["errors"])
    merged = histogram.merge(e["histogram"] for e in entries)
    return requests, errors, dict(kinds), histogram.stats(merged)


def test_ambiguous_step_names_get_scenario_keys(two_scenario_snapshots: list[Snapshot]) -> None:
    summary = summarise(two_scenario_snapshots, run_id="r", status="finished")
    assert set(summary["steps"]) == {"a/home", "b/home", "only_a"}


def test_summary_percentiles_equal_those_of_the_merged_histograms(two_scenario_snapshots: list[Snapshot]) -> None:
    summary = summarise(two_scenario_snapshots, run_id="r", status="finished")
    requests, errors, kinds, stats = _expected_figures(_entries(two_scenario_snapshots))
    assert stats.count == requests > 0
    for key, percentile in LATENCY_KEYS.items():
        assert summary["latency_ms"][key] == stats.percentile(percentile)
    assert summary["latency_ms"]["max"] == stats.max_ms
    assert summary["latency_ms"]["mean"] == round(stats.mean_ms, 3)
    for key, (scenario, step) in {"a/home": ("a", "home"), "b/home": ("b", "home"), "only_a": ("a", "only_a")}.items():
        step_requests, step_errors, step_kinds, step_stats = _expected_figures(
            _entries(two_scenario_snapshots, scenario, step)
        )
        figures = summary["steps"][key]
        assert figures["requests"] == step_requests == step_stats.count
        assert figures["errors"] == step_errors
        assert figures["errors_by_kind"] == step_kinds
        for name, percentile in LATENCY_KEYS.items():
            assert figures["latency_ms"][name] == step_stats.percentile(percentile), (key, name)
        assert figures["latency_ms"]["max"] == step_stats.max_ms
    # The two 'home' steps answer after 1 ms and 10 ms: their figures are not mixed up.
    assert summary["steps"]["a/home"]["latency_ms"]["p50"] < 10 <= summary["steps"]["b/home"]["latency_ms"]["p50"]


def test_summary_totals_are_the_sums_of_the_snapshots(two_scenario_snapshots: list[Snapshot]) -> None:
    snapshots = two_scenario_snapshots
    summary = summarise(snapshots, run_id="r", status="finished")
    requests, errors, kinds, _ = _expected_figures(_entries(snapshots))
    assert summary["requests"] == requests
    assert summary["errors"] == errors
    assert summary["errors_by_kind"] == kinds
    assert set(kinds) == {"status_503"}
    assert summary["errors"] == summary["steps"]["only_a"]["requests"] > 0
    assert summary["error_percent"] == round(100.0 * errors / requests, 3)
    assert summary["requests"] == sum(figures["requests"] for figures in summary["steps"].values())
    assert summary["bytes_sent"] == sum(e["bytes_sent"] for e in _entries(snapshots))
    assert summary["bytes_received"] == sum(e["bytes_received"] for e in _entries(snapshots))
    assert summary["iterations"] == sum(s["iterations"] for s in snapshots)
    assert summary["dropped_arrivals"] == sum(s["dropped_arrivals"] for s in snapshots) == 0
    assert summary["connections_opened"] == sum(s["connections_opened"] for s in snapshots)
    assert summary["peak_vus"] == max(s["active_vus"] for s in snapshots) == 3
    assert summary["duration_s"] == round(snapshots[-1]["elapsed_s"], 3)
    assert summary["rps"] == round(requests / snapshots[-1]["elapsed_s"], 3)
    assert summary["run_id"] == "r" and summary["status"] == "finished"


def test_builder_gives_the_same_summary_in_any_chunking(two_scenario_snapshots: list[Snapshot]) -> None:
    # The builder merges as it goes; the result must not depend on when it is asked.
    builder = SummaryBuilder(workers=1)
    for snapshot in two_scenario_snapshots:
        builder.summary(run_id="r", status="running")
        builder.add(snapshot)
    assert builder.summary(run_id="r", status="finished") == summarise(
        two_scenario_snapshots, run_id="r", status="finished", workers=1
    )


# -- synthetic snapshots (no steps needed for the generator figures) ----------------------------


def snap(second: int, *, cpu: float = 10.0, lateness: float = 0.5, final: bool = False, **extra: Any) -> Snapshot:
    snapshot: Snapshot = {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "timestamp": 0.0,
        "final": final,
        "steps": [],
        "active_vus": 4,
        "busy_vus": 1,
        "iterations": 3,
        "dropped_arrivals": 0,
        "connections_opened": 1,
        "target_vus": 4,
        "target_rate_per_s": None,
        "cpu_percent": cpu,
        "timer_lateness_p99_ms": lateness,
    }
    snapshot.update(extra)
    return snapshot


def test_empty_run_summary_is_all_zero() -> None:
    summary = summarise([], run_id="r", status="interrupted")
    assert summary["requests"] == summary["errors"] == 0
    assert summary["rps"] == 0.0 and summary["error_percent"] == 0.0
    assert summary["latency_ms"] == {"p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    assert summary["steps"] == {}
    assert summary["status"] == "interrupted"


def test_generator_figures_ignore_the_final_interval() -> None:
    limit = CPU_SATURATION_PERCENT_PER_WORKER * 2
    snapshots = [
        snap(1, cpu=50.0, lateness=1.0),
        snap(2, cpu=limit + 1, lateness=2.0),  # saturated by CPU
        snap(3, cpu=0.6 * limit, lateness=TIMER_LATENESS_LIMIT_MS + 5),  # busy, and late: saturated
        snap(4, cpu=20.0, lateness=TIMER_LATENESS_LIMIT_MS + 5, run_delay_ms=412.0, steal_percent=3.5),  # starved
        snap(5, cpu=999.0, lateness=999.0, final=True),  # a few ms of draining: noise
    ]
    summary = summarise(snapshots, run_id="r", status="finished", workers=2)
    assert summary["generator"] == {
        "cpu_percent_max": round(limit + 1, 1),
        "timer_lateness_p99_ms": TIMER_LATENESS_LIMIT_MS + 5,
        "saturated_seconds": 2,
        "starved_seconds": 1,
        "run_delay_ms_max": 412.0,
        "steal_percent_max": 3.5,
    }
    assert summary["iterations"] == 15
    assert summary["connections_opened"] == 5
    assert summary["duration_s"] == 5.0


def test_saturation_rule() -> None:
    assert not is_generator_saturated(snap(1, cpu=89.9, lateness=TIMER_LATENESS_LIMIT_MS), 90.0)
    assert is_generator_saturated(snap(1, cpu=90.0), 90.0)
    assert is_generator_saturated(snap(2, cpu=45.0, lateness=TIMER_LATENESS_LIMIT_MS + 0.001), 90.0)
    # Late with little CPU: starved (the machine did not run it); the first second is start-up.
    assert generator_state(snap(2, cpu=44.9, lateness=TIMER_LATENESS_LIMIT_MS + 0.001), 90.0) == "starved"
    assert generator_state(snap(1, cpu=5.0, lateness=50.0), 90.0) == "ok"


def test_step_key() -> None:
    assert step_key("shop", "home", {"home"}) == "shop/home"
    assert step_key("shop", "cart", {"home"}) == "cart"


def test_render_summary_shows_user_names_verbatim_and_every_figure(two_scenario_snapshots: list[Snapshot]) -> None:
    import io

    from rich.console import Console

    from horde.cli.console import render_summary

    summary = summarise(two_scenario_snapshots, run_id="20260101-000000-abcd", status="finished", workers=1)
    summary["steps"]["GET /a[/b]"] = summary["steps"].pop("only_a")  # a name that looks like markup
    out = io.StringIO()
    render_summary(Console(file=out, width=200), summary, store_url="sqlite:////tmp/x[y].sqlite")
    text = out.getvalue()
    assert "run 20260101-000000-abcd — finished" in text
    assert "GET /a[/b]" in text and "a/home" in text and "b/home" in text
    assert f"{summary['requests']:,}" in text
    assert f"{summary['latency_ms']['p99']:.2f}" in text
    assert "errors by kind: status_503" in text
    assert "stored in sqlite:////tmp/x[y].sqlite as run 20260101-000000-abcd (horde show 20260101-000000-abcd)" in text


def test_groups_are_reported_but_not_counted_again_in_the_totals(two_scenario_snapshots: list[Snapshot]) -> None:
    # A group entry is one pass over requests already counted: it gets its own row, marked as a
    # group, and stays out of the run's request totals and percentiles.
    requests = [dict(entry) for entry in _entries(two_scenario_snapshots)]
    group = {**requests[0], "step": "journey", "kind": "group", "requests": 1000, "ok": 1000, "errors": {}}
    snapshots = [{**snap(1), "steps": requests + [group]}]
    summary = summarise(snapshots, run_id="r", status="finished")
    assert summary["steps"]["journey"]["kind"] == "group"
    assert summary["steps"]["journey"]["requests"] == 1000
    assert summary["requests"] == sum(entry["requests"] for entry in requests)
    merged = histogram.stats(histogram.merge(entry["histogram"] for entry in requests))
    assert summary["latency_ms"]["p99"] == merged.percentile(99.0)


class _Point(TypedDict):
    x: float
    label: str | None
    tags: NotRequired[list[str]]


def test_the_conformance_check_sees_keys_and_value_types() -> None:
    assert conforms({"x": 1, "label": None}, _Point, "point") == []
    assert conforms({"x": "1", "tags": [3], "z": 0}, _Point, "point") == [
        "point.label: missing",
        "point.z: not declared",
        "point.x: '1' is not float",
        "point.tags[0]: 3 is not str",
    ]
    assert conforms({"x": True, "label": 2}, _Point, "point") == [
        "point.x: True is not float",
        "point.label: 2 is not str | None",
    ]


def test_a_real_summary_is_what_its_type_declares(two_scenario_snapshots: list[Snapshot]) -> None:
    # mypy checks summarise() builds a Summary; this checks the run's figures as they come.
    summary = summarise(two_scenario_snapshots, run_id="r", status="finished")
    assert conforms(summary, Summary, "summary") == []
    assert (
        summary["steps"] and summary["checks"] == [] and summary["errors_by_kind"] == {"status_503": summary["errors"]}
    )
    # A step's figures are Figures and its kind: a key the type lacks is reported.
    broken: dict[str, Any] = {**summary, "steps": {"home": {**next(iter(summary["steps"].values())), "extra": 1}}}
    assert conforms(broken, Summary, "summary") == ["summary.steps[home].extra: not declared"]
