"""Thresholds pass, fail, and fail for lack of data, on known figures; their JSON and table say
so; and on a real run against the built-in target they measure what the target was told to do."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rich.console import Console

from synthetic import entry
from horde.control.autostop import AutostopWatch
from horde.errors import ExitCode
from horde.plan import plan_from_dict
from horde.plan.control import AutostopRule, Threshold
from horde.engine.run import Run
from horde.results.summary import summarise
from horde.cli.console import render_verdicts
from horde.control.thresholds import Verdict, all_passed, judge, verdicts_to_json


def snapshot(
    second: int, *entries: dict[str, Any], final: bool = False, iterations: int = 0, dropped: int = 0
) -> dict[str, Any]:
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "final": final,
        "steps": list(entries),
        "iterations": iterations,
        "dropped_arrivals": dropped,
        "cpu_percent": 10.0,
        "timer_lateness_p99_ms": 0.1,
    }


# 200 requests over 2 s: home 100 x 1 ms and 100 x 2 ms with 4 timeouts; login 50 x 0.5 ms.
RUN = [
    snapshot(
        1,
        entry("home", [1000] * 100, errors={"timeout": 4}),
        entry("login", [500] * 50, scenario="auth"),
        entry("visit", [1900] * 10, kind="group"),
        iterations=99,
        dropped=1,
    ),
    snapshot(2, entry("home", [2000] * 50), iterations=100),
]


def verdict_of(condition: str, **scope: Any) -> Verdict:
    (verdict,) = judge([Threshold(condition=condition, **scope)], RUN)
    return verdict


@pytest.mark.parametrize(
    ("condition", "scope", "measured", "passed"),
    [
        ("p50 < 1.5ms", {}, 1.0, True),
        ("p90 < 1.5ms", {}, 2.0, False),
        ("p95 <= 2ms", {"step": "home"}, 2.0, True),
        ("p95 < 2ms", {"step": "home"}, 2.0, False),  # the limit itself does not pass '<'
        ("max < 1ms", {"scenario": "auth"}, 0.5, True),
        ("mean < 1ms", {"step": "visit"}, 1.9, False),  # a group is judged on its passes
        ("min > 0.4ms", {}, 0.5, True),
        ("errors < 2%", {}, 2.0, False),
        ("errors < 2.01%", {}, 2.0, True),
        ("errors.timeout <= 2%", {"step": "home"}, 4 / 150 * 100, False),
        ("errors.status_503 < 0.1%", {}, 0.0, True),
        ("dropped < 1%", {}, 0.5, True),
        ("rps > 100", {}, 100.0, False),
        ("rps >= 100", {}, 100.0, True),
        ("ok_rps > 95", {}, 98.0, True),
        ("requests > 150", {"step": "home"}, 150.0, False),
    ],
)
def test_known_verdicts(condition: str, scope: dict[str, Any], measured: float, passed: bool) -> None:
    verdict = verdict_of(condition, **scope)
    assert verdict.measured == pytest.approx(measured)
    assert verdict.passed is passed
    assert verdict.message.startswith(f"{verdict.name} {'passed' if passed else 'failed'}: ")


def test_a_threshold_without_data_fails_and_says_why() -> None:
    verdict = verdict_of("p95 < 200ms", step="nothing_here")
    assert (verdict.measured, verdict.passed) == (None, False)
    assert verdict.message == "p95 < 200ms [step nothing_here] failed: no requests in scope"
    assert not verdict_of("errors < 5%", step="nothing_here").passed
    (rate,) = judge([Threshold(condition="rps > 1")], [])
    assert rate.message == "rps > 1 failed: no measured time"
    # A count of nothing is a measurement, and here a failing one.
    count = verdict_of("requests > 0", step="nothing_here")
    assert (count.measured, count.passed) == (0.0, False)


def test_failure_message_names_measured_value_and_limit() -> None:
    verdict = verdict_of("p90 < 1.5ms", scenario="shop", step="home")
    assert verdict.name == "p90 < 1.5ms [step home of scenario shop]"
    assert verdict.message == "p90 < 1.5ms [step home of scenario shop] failed: 2 ms, not < 1.5 ms"
    assert (verdict.unit, verdict.limit, verdict.scope) == ("ms", "< 1.5 ms", "step home of scenario shop")


def test_verdicts_in_order_and_to_json() -> None:
    verdicts = judge([Threshold(condition="p50 < 1.5ms"), Threshold(condition="errors < 1%", step="home")], RUN)
    assert not all_passed(verdicts) and all_passed(verdicts[:1]) and all_passed([])
    assert verdicts_to_json(verdicts) == [
        {
            "condition": "p50 < 1.5ms",
            "step": None,
            "scenario": None,
            "measured": 1.0,
            "passed": True,
            "message": "p50 < 1.5ms passed: 1 ms",
        },
        {
            "condition": "errors < 1%",
            "step": "home",
            "scenario": None,
            "measured": 2.667,
            "passed": False,
            "message": "errors < 1% [step home] failed: 2.67 %, not < 1 %",
        },
    ]


def test_render_verdicts_shows_each_result() -> None:
    console = Console(record=True, width=120, color_system=None)
    verdicts = judge([Threshold(condition="p50 < 1.5ms"), Threshold(condition="p95 < 1ms", step="[bold]x")], RUN)
    render_verdicts(console, verdicts_to_json(verdicts))
    text = console.export_text()
    assert "thresholds — 1 of 2 passed" in text
    assert "p50 < 1.5ms" in text and "pass" in text
    # A step name is shown as written, not read as markup.
    assert "step [bold]x" in text and "no data" in text and "FAIL" in text
    empty = Console(record=True, width=120)
    render_verdicts(empty, [])
    assert empty.export_text() == ""


def test_a_real_run_is_judged_on_what_the_target_did(builtin_target: Any) -> None:
    """Every iteration sends one request that takes 20 ms and one that gets a 503, inside a
    group: half the requests are 503s, every pass of the group failed, the group is not counted
    as requests, and the figures agree with the run's summary."""
    vus = 2
    plan = plan_from_dict(
        {
            "version": 1,
            "name": "judged",
            "target": {"base_url": f"http://127.0.0.1:{builtin_target.port}"},
            "scenarios": [
                {
                    "name": "shop",
                    "steps": [
                        {
                            "type": "group",
                            "name": "visit",
                            "steps": [
                                {"name": "slow", "method": "GET", "path": "/delay/20"},
                                {"name": "broken", "method": "GET", "path": "/status/503"},
                            ],
                        }
                    ],
                    "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": 2, "vus": vus}]},
                }
            ],
            "graceful_stop_s": 2,
        }
    )
    snapshots = []
    deadline = time.monotonic() + 30
    with Run.start(plan, workers=1) as run:
        for one in run:
            snapshots.append(one)
            assert time.monotonic() < deadline
    # A second's boundary (or the stop) may fall between an iteration's two requests, so a
    # second holds up to one more `slow` than `broken` per VU: the 503 share is 50 % within that.
    whole_seconds = [one for one in snapshots if not one["final"]]
    verdicts = judge(
        [
            Threshold(condition="p50 >= 20ms", step="slow"),
            Threshold(condition="p50 < 20ms", step="broken"),
            Threshold(condition="errors.status_503 > 48%"),
            Threshold(condition="errors.status_503 < 52%"),
            Threshold(condition="errors < 100%", step="visit"),
            Threshold(condition="requests > 10", step="visit"),
        ],
        whole_seconds,
    )
    assert [verdict.passed for verdict in verdicts] == [True, True, True, True, False, True], [
        v.message for v in verdicts
    ]
    assert verdicts[4].measured == 100.0
    # One pass of the group per iteration, so as many passes as requests of each of its steps
    # over the whole run. A pass is counted when its last step ends, so the whole seconds may
    # hold up to one `slow` per VU whose pass ended in the final, partial second.
    (slow,) = judge([Threshold(condition="requests > 0", step="slow")], whole_seconds)
    assert slow.measured - vus <= verdicts[5].measured <= slow.measured
    passes, slows = judge(
        [Threshold(condition="requests > 0", step="visit"), Threshold(condition="requests > 0", step="slow")], snapshots
    )
    assert passes.measured == slows.measured > 0

    summary = summarise(snapshots, run_id="r", status="finished")
    everything = judge(
        [
            Threshold(condition="errors < 1%"),
            Threshold(condition="requests > 0"),
            Threshold(condition="p95 < 1s", step="slow"),
            Threshold(condition="rps > 1"),
        ],
        snapshots,
    )
    assert [verdict.measured for verdict in everything[:3]] == [
        pytest.approx(summary["error_percent"], abs=1e-3),
        summary["requests"],
        summary["steps"]["slow"]["latency_ms"]["p95"],
    ]
    assert everything[3].measured == pytest.approx(summary["rps"], rel=1e-2)

    watch = AutostopWatch([AutostopRule(when="errors > 40%", window_s=1)], cpu_limit_percent=1e9)
    firing = next(f for f in (watch.observe(one) for one in snapshots) if f is not None)
    assert (firing.second, firing.exit_code) == (1, ExitCode.AUTOSTOP_ERRORS)
    assert firing.measured == pytest.approx(50.0, abs=3.0)  # 2 VUs: at most 2 requests of ~80 off
