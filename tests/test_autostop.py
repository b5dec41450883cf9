"""Autostop fires at the first second its rule holds over a full window, not before, not after:
known timelines of latency, errors, dropped arrivals, failures and generator saturation."""

from __future__ import annotations

from typing import Any

import pytest

from synthetic import entry
from horde.control.autostop import EXIT_CODES, AutostopWatch, Firing, clock
from horde.errors import ExitCode
from horde.plan.control import AutostopRule

CPU_LIMIT = 180.0


def snapshot(
    second: int,
    *entries: dict[str, Any],
    final: bool = False,
    iterations: int = 10,
    dropped: int = 0,
    cpu: float = 20.0,
    lateness: float = 0.2,
) -> dict[str, Any]:
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "final": final,
        "steps": list(entries),
        "iterations": iterations,
        "dropped_arrivals": dropped,
        "cpu_percent": cpu,
        "timer_lateness_p99_ms": lateness,
    }


def rule(when: str, **fields: Any) -> AutostopRule:
    return AutostopRule(when=when, **fields)


def first_firing(watch: AutostopWatch, snapshots: list[dict[str, Any]]) -> Firing | None:
    for one in snapshots:
        firing = watch.observe(one)
        if firing is not None:
            return firing
    return None


def latency_timeline(jump_at: int, seconds: int = 30) -> list[dict[str, Any]]:
    """20 ms for every request until ``jump_at``, 500 ms from then on; 20 requests a second."""
    return [snapshot(n, entry("home", [20_000 if n < jump_at else 500_000] * 20)) for n in range(1, seconds + 1)]


def test_a_latency_jump_fires_within_one_window() -> None:
    watch = AutostopWatch([rule("p95 > 200ms", window_s=5)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, latency_timeline(jump_at=11))
    assert firing is not None
    # One bad second is 20 % of a 5 s window: p95 is bad at once.
    assert firing.second == 11
    assert (firing.reason, firing.exit_code) == ("latency", ExitCode.AUTOSTOP_LATENCY)
    assert firing.measured == pytest.approx(500.0, rel=1e-3)
    assert firing.message == "autostop: p95 over the last 5 s was 500.2 ms (> 200 ms) at 00:11"


def test_a_median_needs_most_of_the_window_bad() -> None:
    watch = AutostopWatch([rule("p50 > 200ms", window_s=5)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, latency_timeline(jump_at=11))
    # 3 bad seconds of 5 are 60 % of the samples: the median turns at the third, within the window.
    assert firing is not None and firing.second == 13


def test_a_good_run_never_fires() -> None:
    watch = AutostopWatch(
        [rule("p95 > 200ms", window_s=5), rule("errors > 1%"), rule("no_success")], cpu_limit_percent=CPU_LIMIT
    )
    assert first_firing(watch, latency_timeline(jump_at=1000)) is None
    assert watch.fired is None


def test_nothing_fires_before_the_window_is_full() -> None:
    watch = AutostopWatch([rule("p95 > 200ms", window_s=5)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, latency_timeline(jump_at=1))
    assert firing is not None and firing.second == 5


def test_after_s_holds_the_rule_back() -> None:
    watch = AutostopWatch([rule("p95 > 200ms", window_s=5, after_s=8)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, latency_timeline(jump_at=1))
    assert firing is not None and (firing.second, firing.elapsed_s) == (8, 8.0)


def test_errors_fire_with_their_own_reason_and_code() -> None:
    seconds = [
        snapshot(n, entry("home", [1000] * 100, errors={"timeout": 3 if n >= 4 else 0, "status_503": 10}))
        for n in range(1, 10)
    ]
    # 10 % of 503s all along: errors > 5% fires as soon as the window is full.
    watch = AutostopWatch([rule("errors > 5%", window_s=3)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    assert firing is not None and firing.second == 3
    assert (firing.reason, firing.exit_code, firing.measured) == ("errors", ExitCode.AUTOSTOP_ERRORS, 10.0)
    # Timeouts alone: 3 % from second 4 on; over a 2 s window that is 1.5 % at second 4.
    watch = AutostopWatch([rule("errors.timeout > 1%", window_s=2)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    assert firing is not None and firing.second == 4 and firing.measured == 1.5
    assert firing.message == "autostop: errors.timeout over the last 2 s was 1.5 % (> 1 %) at 00:04"


def test_dropped_arrivals_fire_with_their_own_code() -> None:
    # 100 arrivals a second; from second 6 on, 10 of them find no free VU.
    seconds = [
        snapshot(n, entry("home", [1000] * 10), iterations=90 if n >= 6 else 100, dropped=10 if n >= 6 else 0)
        for n in range(1, 20)
    ]
    watch = AutostopWatch([rule("dropped > 4%", window_s=4)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    # Second 6 alone: 10 of 400 arrivals (2.5 %); seconds 6 and 7: 20 of 400 (5 %).
    assert firing is not None and firing.second == 7
    assert (firing.reason, firing.exit_code, firing.measured) == ("dropped", ExitCode.AUTOSTOP_DROPPED, 5.0)


def test_no_success_fires_only_when_the_whole_window_failed() -> None:
    def second(n: int, ok: bool) -> dict[str, Any]:
        return snapshot(n, entry("home", [1000] * 10, errors={} if ok else {"refused": 10}))

    good = {1, 2, 3, 6}
    seconds = [second(n, ok=n in good) for n in range(1, 15)]
    watch = AutostopWatch([rule("no_success", window_s=4)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    # Seconds 4-5 fail, 6 succeeds, 7 on fail: the window 7-10 is the first without a success.
    assert firing is not None and firing.second == 10
    assert (firing.reason, firing.exit_code, firing.measured) == ("no_success", ExitCode.AUTOSTOP_NO_SUCCESS, 0.0)
    assert firing.message == "autostop: no successful response over the last 4 s (40 requests, all failed) at 00:10"


def test_no_success_fires_on_silence_too() -> None:
    # A hung target: no responses at all.
    seconds = [snapshot(n, entry("home", [])) for n in range(1, 5)]
    firing = first_firing(AutostopWatch([rule("no_success", window_s=3)], cpu_limit_percent=CPU_LIMIT), seconds)
    assert firing is not None and firing.second == 3
    assert "(no responses at all)" in firing.message


def test_a_latency_rule_without_requests_does_not_fire() -> None:
    seconds = [snapshot(n, entry("home", [])) for n in range(1, 5)]
    watch = AutostopWatch([rule("p95 > 1ms", window_s=2), rule("errors > 1%", window_s=2)], cpu_limit_percent=CPU_LIMIT)
    assert first_firing(watch, seconds) is None


def test_generator_saturation_must_last_the_whole_window() -> None:
    # Late timers saturate the generator too when it used most of its CPU (at 8); late timers
    # with little CPU used (at 9) are a starved generator, which autostop leaves alone.
    cpu = {n: 195.0 for n in (2, 3, 5, 6, 7)} | {8: 120.0}
    lateness = {8: 25.0, 9: 25.0}
    seconds = [
        snapshot(n, entry("home", [1000]), cpu=cpu.get(n, 20.0), lateness=lateness.get(n, 0.2)) for n in range(1, 12)
    ]
    watch = AutostopWatch([rule("generator_saturated", window_s=3)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    # 2-3 saturated, 4 not; 5, 6, 7 saturated: the first full window of saturation ends at 7.
    assert firing is not None and firing.second == 7
    assert (firing.reason, firing.exit_code, firing.measured) == (
        "generator_saturated",
        ExitCode.AUTOSTOP_GENERATOR,
        3.0,
    )
    assert "CPU up to 195 %" in firing.message
    watch = AutostopWatch([rule("generator_saturated", window_s=2)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds[6:])
    assert firing is not None and firing.second == 8 and "timer lateness p99 up to 25 ms" in firing.message
    watch = AutostopWatch([rule("generator_saturated", window_s=2)], cpu_limit_percent=CPU_LIMIT)
    assert first_firing(watch, seconds[7:]) is None, "a starved second is not a saturated one"


def test_a_rule_watches_only_its_scope() -> None:
    seconds = [
        snapshot(
            n,
            entry("home", [500_000] * 10),
            entry("login", [10_000 if n < 5 else 900_000] * 10, scenario="auth"),
            entry("visit", [2_000_000] * 5, kind="group"),
        )
        for n in range(1, 10)
    ]
    watch = AutostopWatch([rule("p95 > 800ms", window_s=2, step="login")], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    assert firing is not None and firing.second == 5
    assert firing.message.startswith("autostop: p95 of step login over the last 2 s was ")
    # Every request, the group left out: p75 passes 800 ms once login's 900 ms fill the window
    # (seconds 5-6: 20 x 500 ms, 20 x 900 ms). Counting the group's 2 s passes would fire at 2.
    watch = AutostopWatch([rule("p75 > 800ms", window_s=2)], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, seconds)
    assert firing is not None and firing.second == 6
    watch = AutostopWatch([rule("p95 > 800ms", window_s=2, scenario="shop")], cpu_limit_percent=CPU_LIMIT)
    assert first_firing(watch, seconds) is None


def test_final_snapshots_are_ignored_and_the_watch_fires_once() -> None:
    watch = AutostopWatch([rule("errors > 50%", window_s=1)], cpu_limit_percent=CPU_LIMIT)
    assert watch.observe(snapshot(1, entry("home", [1000] * 4, errors={"reset": 4}), final=True)) is None
    firing = watch.observe(snapshot(2, entry("home", [1000] * 4, errors={"reset": 4})))
    assert firing is not None and watch.fired is firing
    assert watch.observe(snapshot(3, entry("home", [1000] * 4, errors={"reset": 4}))) is None


def test_the_first_listed_rule_wins_a_tie() -> None:
    seconds = [snapshot(n, entry("home", [900_000] * 10, errors={"timeout": 10})) for n in range(1, 4)]
    watch = AutostopWatch(
        [rule("errors > 5%", window_s=2), rule("p95 > 500ms", window_s=2)], cpu_limit_percent=CPU_LIMIT
    )
    firing = first_firing(watch, seconds)
    assert firing is not None and firing.reason == "errors" and firing.rule.when == "errors > 5%"


def test_to_json_holds_the_rule_and_the_moment() -> None:
    watch = AutostopWatch([rule("p95 > 200ms", window_s=5, after_s=2, step="home")], cpu_limit_percent=CPU_LIMIT)
    firing = first_firing(watch, latency_timeline(jump_at=11))
    assert firing is not None
    stored = firing.to_json()
    assert stored == {
        "when": "p95 > 200ms",
        "window_s": 5,
        "after_s": 2.0,
        "step": "home",
        "scenario": None,
        "reason": "latency",
        "measured": stored["measured"],
        "unit": "ms",
        "second": 11,
        "elapsed_s": 11.0,
        "exit_code": 10,
        "message": firing.message,
    }
    assert stored["measured"] == pytest.approx(500.0, rel=1e-3)


def test_exit_codes() -> None:
    assert {reason: int(code) for reason, code in EXIT_CODES.items()} == {
        "latency": 10,
        "errors": 11,
        "no_success": 12,
        "generator_saturated": 13,
        "dropped": 14,
        "monitor": 16,
    }
    assert int(ExitCode.THRESHOLDS_FAILED) == 4
    # Distinct from every other code of the command.
    assert len({int(code) for code in ExitCode}) == len(ExitCode)


def test_clock() -> None:
    assert [clock(s) for s in (0, 9.6, 61, 3599.4, 3600)] == ["00:00", "00:10", "01:01", "59:59", "1:00:00"]
