"""Figures of a scope are known answers: scopes pick the right entries (groups out of the
totals), percentiles come from the exact merge of histograms of known values, every metric a
condition can name is measured in its unit, and a window slides."""

from __future__ import annotations

import math
from typing import Any

import pytest

from synthetic import entry
from horde.engine import histogram
from horde.control.measure import Figures, Scope, Window, combine, format_limit, format_value, measure, unit_of
from horde.plan.control import parse_condition


def snapshot(
    second: int,
    *entries: dict[str, Any],
    interval_s: float = 1.0,
    final: bool = False,
    iterations: int = 0,
    dropped: int = 0,
) -> dict[str, Any]:
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": interval_s,
        "final": final,
        "steps": list(entries),
        "iterations": iterations,
        "dropped_arrivals": dropped,
        "cpu_percent": 5.0,
        "timer_lateness_p99_ms": 0.1,
    }


# Values below 2048 µs are exact in an HDR histogram of 3 significant digits: known answers.
SHOP = [
    snapshot(
        1,
        entry("home", [1000] * 9 + [2000], errors={"timeout": 1}),
        entry("login", [500] * 4, scenario="auth"),
        entry("visit", [1900] * 3, kind="group", errors={"step_failed": 1}),
        iterations=18,
        dropped=2,
    ),
    snapshot(
        2,
        entry("home", [1000] * 10, errors={"status_503": 2}),
        entry("home", [1500] * 2, scenario="auth"),
        iterations=20,
        dropped=0,
    ),
]


def test_default_scope_is_every_request_step_and_leaves_groups_out() -> None:
    figures = measure(SHOP)
    assert figures.requests == 10 + 4 + 10 + 2
    assert figures.ok == figures.requests - 3
    assert figures.errors == {"timeout": 1, "status_503": 2}
    # 1.9 ms (the group) would be the max if groups were counted.
    assert figures.max_ms == 2.0
    assert figures.samples == 26


def test_a_named_group_is_measured_on_its_own() -> None:
    figures = measure(SHOP, step="visit")
    assert (figures.requests, figures.ok, figures.errors) == (3, 2, {"step_failed": 1})
    assert figures.latency_ms(50) == figures.min_ms == figures.max_ms == 1.9


def test_a_named_step_spans_scenarios_unless_one_is_given() -> None:
    assert measure(SHOP, step="home").requests == 22
    assert measure(SHOP, step="home", scenario="auth").requests == 2
    assert measure(SHOP, step="home", scenario="shop").requests == 20
    assert measure(SHOP, scenario="auth").requests == 6
    assert measure(SHOP, scenario="auth").max_ms == 1.5


def test_several_named_steps_add_up() -> None:
    figures = measure(SHOP, steps=["login", "visit"])
    assert figures.requests == 4 + 3
    assert measure(SHOP, step="login", steps=["visit"]).requests == 7


def test_an_empty_scope_has_no_latency_and_no_error_share() -> None:
    figures = measure(SHOP, step="nowhere")
    assert figures.requests == 0 and figures.histogram == b""
    assert figures.latency_ms(95) is None and figures.mean_ms is None
    assert figures.value(parse_condition("p95 < 1ms")) is None
    assert figures.value(parse_condition("errors < 1%")) is None
    # A count of nothing is still a count: 'requests > 1000' must fail, not lack data.
    assert figures.value(parse_condition("requests > 1000")) == 0.0
    assert figures.value(parse_condition("rps > 1")) == 0.0


def test_percentiles_come_from_the_exact_merge_across_seconds() -> None:
    # 90 samples of 1 ms in one second, 10 of 2 ms in the next: p90 1 ms, p91 2 ms. Averaging the
    # seconds' own p95 (1 ms and 2 ms) would say 1.5 ms.
    seconds = [snapshot(1, entry("home", [1000] * 90)), snapshot(2, entry("home", [2000] * 10))]
    figures = measure(seconds)
    assert figures.latency_ms(90) == 1.0
    assert figures.latency_ms(91) == 2.0
    assert figures.latency_ms(95) == 2.0
    assert figures.mean_ms == pytest.approx(1.1)
    assert (figures.min_ms, figures.max_ms) == (1.0, 2.0)


def nearest_rank_ms(values_us: list[int], percentile: float) -> float:
    """The percentile by definition: the smallest value with ``percentile`` % at or below it."""
    ordered = sorted(values_us)
    return ordered[max(0, math.ceil(percentile / 100 * len(ordered)) - 1)] / 1000


def test_large_latencies_are_within_the_histogram_precision() -> None:
    values = [20_000 + 100 * i for i in range(100)] + [812_000] * 5
    figures = measure([snapshot(1, entry("home", values[:60])), snapshot(2, entry("home", values[60:]))])
    for percentile, expected in ((50, 25.2), (95, 29.9), (99.9, 812.0)):
        assert nearest_rank_ms(values, percentile) == expected
        # 3 significant digits: within 0.1 %.
        assert figures.latency_ms(percentile) == pytest.approx(expected, rel=1e-3)
    assert figures.value(parse_condition("p99.9 < 1s")) == figures.latency_ms(99.9)


def test_every_metric_is_measured_in_its_unit() -> None:
    seconds = [
        snapshot(
            1,
            entry("home", [1000] * 80 + [2000] * 20, errors={"timeout": 4, "status_503": 6}),
            interval_s=1.0,
            iterations=90,
            dropped=10,
        ),
        snapshot(2, entry("home", [1000] * 100), interval_s=1.0, iterations=100),
        # The last interval is short, and counts with its true length.
        snapshot(3, entry("home", [1000] * 50), interval_s=0.5, final=True, iterations=50),
    ]
    figures = measure(seconds)
    assert figures.seconds == 2.5
    expected = {
        "p50 < 1ms": 1.0,
        "p95 < 1ms": 2.0,
        "p100 < 1ms": 2.0,
        "min < 1ms": 1.0,
        "max < 1ms": 2.0,
        "mean < 1ms": 1.08,
        "errors < 1%": 4.0,
        "errors.timeout < 1%": 1.6,
        "errors.status_503 < 1%": 2.4,
        "errors.refused < 1%": 0.0,
        "dropped < 1%": 10 / 250 * 100,
        "rps > 1": 100.0,
        "ok_rps > 1": 96.0,
        "requests > 1": 250.0,
    }
    for text, value in expected.items():
        assert figures.value(parse_condition(text)) == pytest.approx(value), text


def test_dropped_share_is_of_every_arrival() -> None:
    assert Figures(iterations=90, dropped_arrivals=10).dropped_percent == 10.0
    assert Figures(iterations=0, dropped_arrivals=5).dropped_percent == 100.0
    assert Figures().dropped_percent == 0.0


def test_rates_need_time() -> None:
    assert measure([]).value(parse_condition("rps > 1")) is None
    assert Figures(requests=10).rps == 0.0


def test_window_keeps_the_last_seconds_and_ignores_the_final_one() -> None:
    window = Window(3)
    for second in range(1, 6):
        window.add(snapshot(second, entry("home", [1000 * second])))
        assert window.full == (second >= 3)
        assert len(window) == min(second, 3)
    window.add(snapshot(6, entry("home", [1]), final=True))
    assert [s["second"] for s in window.snapshots] == [3, 4, 5]
    figures = window.figures()
    assert (figures.requests, figures.min_ms, figures.seconds) == (3, 3.0, 3.0)
    assert figures.max_ms == pytest.approx(5.0, rel=1e-3)


def test_window_figures_equal_those_of_measure_for_every_scope() -> None:
    window = Window(2)
    seconds = [
        snapshot(1, entry("home", [100, 200]), entry("login", [300], scenario="auth")),
        snapshot(2, entry("home", [400], errors={"timeout": 1}), entry("visit", [900], kind="group")),
        snapshot(3, entry("home", [500, 600, 700]), entry("login", [800, 1200], scenario="auth")),
    ]
    scopes: list[dict[str, Any]] = [{}, {"step": "home"}, {"scenario": "auth"}, {"steps": ["home", "visit"]}]
    for index, second in enumerate(seconds):
        window.add(second)
        for scope in scopes:
            expected = measure(seconds[max(0, index - 1) : index + 1], **scope)
            got = window.figures(**scope)
            assert (got.requests, got.ok, got.errors, got.seconds) == (
                expected.requests,
                expected.ok,
                expected.errors,
                expected.seconds,
            )
            assert got.samples == expected.samples
            assert [got.latency_ms(p) for p in (50, 95, 100)] == [expected.latency_ms(p) for p in (50, 95, 100)]


def test_a_window_holds_at_least_a_second() -> None:
    with pytest.raises(ValueError):
        Window(0)


def test_combine_equals_measuring_everything_at_once() -> None:
    parts = [measure([second]) for second in SHOP]
    whole = combine(parts)
    expected = measure(SHOP)
    assert (whole.requests, whole.ok, whole.errors, whole.seconds, whole.iterations, whole.dropped_arrivals) == (
        expected.requests,
        expected.ok,
        expected.errors,
        expected.seconds,
        expected.iterations,
        expected.dropped_arrivals,
    )
    assert histogram.stats(whole.histogram) == histogram.stats(expected.histogram)
    assert combine([]).histogram == b""


def test_scope_descriptions() -> None:
    assert Scope.of().describe() == "all requests"
    assert Scope.of(step="login", scenario="auth").describe() == "step login of scenario auth"
    assert Scope.of(steps=["a", "b", "a"]).describe() == "steps a, b"
    # The same scope said two ways is one scope (windows cache per scope).
    assert Scope.of(step="a") == Scope.of(steps=["a"])


def test_units_and_formats() -> None:
    assert [unit_of(parse_condition(text)) for text in ("p95 < 1s", "errors < 1%", "rps > 1", "requests > 1")] == [
        "ms",
        "%",
        "req/s",
        "",
    ]
    assert format_limit(parse_condition("p95 < 1.5s")) == "< 1,500 ms"
    assert format_limit(parse_condition("errors.timeout <= 0.5%")) == "<= 0.5 %"
    assert format_value(0.0, "ms") == "0 ms"
    assert format_value(1234.56, "req/s") == "1,234.6 req/s"
