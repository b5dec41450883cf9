"""Autostop: ends a run early when one of its rules holds over a sliding window of seconds.

Each rule is watched over the last ``window_s`` seconds of the run, once the window is full and
``after_s`` has passed. A ``METRIC OP VALUE`` rule holds when the metric measured over the
merged window passes the comparison (the window's percentiles come from the exact merge of its
histograms); ``no_success`` holds when the scope got no successful response in the whole window;
``generator_saturated`` when every second of the window was saturated. A condition that starts
to hold is therefore seen within one window; a percentile usually sooner, as soon as enough of
the window's samples are bad.

>>> from horde.plan.control import AutostopRule
>>> watch = AutostopWatch([AutostopRule(when="no_success", window_s=3)], cpu_limit_percent=90)
>>> def second(n: int) -> dict[str, object]:
...     return {"second": n, "elapsed_s": float(n), "interval_s": 1.0, "final": False, "iterations": 0,
...             "dropped_arrivals": 0, "cpu_percent": 5.0, "timer_lateness_p99_ms": 0.1, "steps": [
...         {"scenario": "s", "step": "home", "kind": "request", "requests": 10, "ok": 0,
...          "errors": {"refused": 10}, "histogram": b""}]}
>>> [watch.observe(second(n)) for n in (1, 2)]
[None, None]
>>> firing = watch.observe(second(3))
>>> firing.reason, int(firing.exit_code), firing.message
('no_success', 12, 'autostop: no successful response over the last 3 s (30 requests, all failed) at 00:03')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from horde.errors import ExitCode
from horde.control.measure import Scope, Window, format_limit, format_value, unit_of
from horde.engine.snapshot import Snapshot
from horde.plan.control import AutostopRule, Condition
from horde.monitors import ConditionStreak
from horde.results.summary import is_generator_saturated
from horde.results.summary_blocks import AutostopBlock
from horde.store import MonitorSample

#: The exit code the run ends with, by the reason autostop fired.
EXIT_CODES = {
    "latency": ExitCode.AUTOSTOP_LATENCY,
    "errors": ExitCode.AUTOSTOP_ERRORS,
    "no_success": ExitCode.AUTOSTOP_NO_SUCCESS,
    "generator_saturated": ExitCode.AUTOSTOP_GENERATOR,
    "dropped": ExitCode.AUTOSTOP_DROPPED,
    "monitor": ExitCode.AUTOSTOP_MONITOR,
}


@dataclass(frozen=True)
class Firing:
    """A rule that held: why, what was measured, and when."""

    rule: AutostopRule
    #: ``latency``, ``errors``, ``dropped``, ``no_success`` or ``generator_saturated``.
    reason: str
    #: The metric over the window in its unit (ms, %); ok responses for ``no_success`` (0);
    #: saturated seconds for ``generator_saturated``.
    measured: float
    #: ``ms`` or ``%`` for a condition; ``""`` for ``no_success``, ``s`` for ``generator_saturated``.
    unit: str
    #: The snapshot's ``second`` and ``elapsed_s`` at which the rule held.
    second: int
    elapsed_s: float
    exit_code: ExitCode
    #: ``autostop: p95 over the last 10 s was 812.4 ms (> 500 ms) at 00:37``.
    message: str

    def to_json(self) -> AutostopBlock:
        """The firing as it is stored with the run."""
        return {
            "when": self.rule.when,
            "window_s": self.rule.window_s,
            "after_s": self.rule.after_s,
            "step": self.rule.step,
            "scenario": self.rule.scenario,
            "reason": self.reason,
            "measured": round(self.measured, 3),
            "unit": self.unit,
            "second": self.second,
            "elapsed_s": round(self.elapsed_s, 3),
            "exit_code": int(self.exit_code),
            "message": self.message,
        }


class AutostopWatch:
    """Watches a run's snapshots against its autostop rules; tells the first rule to hold.

    ``cpu_limit_percent`` is the generator's CPU limit for ``generator_saturated`` (the summary's
    ``CPU_SATURATION_PERCENT_PER_WORKER`` times the engine's workers). After the first firing the
    watch is done: the run is stopping, and its drain must not fire again.
    """

    def __init__(self, rules: Sequence[AutostopRule], *, cpu_limit_percent: float) -> None:
        self._rules = [_Watched(rule) for rule in rules if rule.monitor_condition is None]
        self._cpu_limit_percent = cpu_limit_percent
        self.fired: Firing | None = None

    def observe(self, snapshot: Snapshot) -> Firing | None:
        """Takes one snapshot (call once per snapshot, in order); the firing when a rule holds
        at this second, else None. Final snapshots are ignored."""
        if self.fired is not None or snapshot["final"]:
            return None
        for watched in self._rules:
            watched.window.add(snapshot)
        for watched in self._rules:
            firing = watched.check(snapshot, self._cpu_limit_percent)
            if firing is not None:
                self.fired = firing
                return firing
        return None


class MonitorWatch:
    """Watches monitors' samples against the autostop rules that read a monitor
    (``monitor.db.cpu.busy_percent > 95 for 10s``): a rule fires once its condition held in
    every sample for its ``for`` (else its ``window_s``) seconds, after ``after_s``."""

    def __init__(self, rules: Sequence[AutostopRule]) -> None:
        self._streaks = [
            (rule, ConditionStreak(condition, default_for_s=rule.window_s))
            for rule in rules
            if (condition := rule.monitor_condition) is not None
        ]
        self.fired: Firing | None = None

    def __bool__(self) -> bool:
        return bool(self._streaks)

    def observe(self, sample: MonitorSample) -> Firing | None:
        if self.fired is not None:
            return None
        for rule, streak in self._streaks:
            first = streak.observe(sample)
            if first is None or sample.elapsed_s < rule.after_s:
                continue
            condition = streak.condition
            measured = streak.worst if streak.worst is not None else 0.0
            text = (
                f"{condition.monitor}'s {condition.metric} was {condition.op} {condition.value:g} for {streak.for_s} s "
                f"from second {first} (last {streak.last_value:g})"
            )
            self.fired = Firing(
                rule=rule,
                reason="monitor",
                measured=measured,
                unit="",
                second=sample.second,
                elapsed_s=sample.elapsed_s,
                exit_code=EXIT_CODES["monitor"],
                message=f"autostop: {text} at {clock(sample.elapsed_s)}",
            )
            return self.fired
        return None


class _Watched:
    """One rule with its window."""

    def __init__(self, rule: AutostopRule) -> None:
        self.rule = rule
        self.window = Window(rule.window_s)
        self.scope = Scope.of(scenario=rule.scenario, step=rule.step)
        # Events are words; everything else was checked as a condition by the plan.
        self.condition: Condition | None = rule.condition

    def check(self, snapshot: Snapshot, cpu_limit_percent: float) -> Firing | None:
        if float(snapshot["elapsed_s"]) < self.rule.after_s or not self.window.full:
            return None
        if self.rule.when == "generator_saturated":
            return self._saturated(snapshot, cpu_limit_percent)
        figures = self.window.figures(scenario=self.rule.scenario, step=self.rule.step)
        where = "" if self.rule.step is None and self.rule.scenario is None else f" of {self.scope.describe()}"
        last = f"the last {self.rule.window_s} s"
        if self.condition is None:
            if figures.ok:
                return None
            outcome = f"{figures.requests:,} requests, all failed" if figures.requests else "no responses at all"
            return self._firing(
                snapshot, "no_success", 0.0, "", f"no successful response{where} over {last} ({outcome})"
            )
        measured = figures.value(self.condition)
        # No data (no requests in the window) is not a reason to stop: no_success is for that.
        if measured is None or not self.condition.holds(measured):
            return None
        unit = unit_of(self.condition)
        text = f"{self.condition.metric}{where} over {last} was {format_value(measured, unit)} ({format_limit(self.condition)})"
        return self._firing(snapshot, _reason(self.condition), measured, unit, text)

    def _saturated(self, snapshot: Snapshot, cpu_limit_percent: float) -> Firing | None:
        seconds = self.window.snapshots
        if not all(is_generator_saturated(second, cpu_limit_percent) for second in seconds):
            return None
        cpu = max(float(second["cpu_percent"]) for second in seconds)
        lateness = max(float(second["timer_lateness_p99_ms"]) for second in seconds)
        text = (
            f"the generator was saturated each of the last {self.rule.window_s} s "
            f"(CPU up to {cpu:.0f} %, timer lateness p99 up to {format_value(lateness, 'ms')})"
        )
        return self._firing(snapshot, "generator_saturated", float(len(seconds)), "s", text)

    def _firing(self, snapshot: Snapshot, reason: str, measured: float, unit: str, text: str) -> Firing:
        elapsed_s = float(snapshot["elapsed_s"])
        return Firing(
            rule=self.rule,
            reason=reason,
            measured=measured,
            unit=unit,
            second=int(snapshot["second"]),
            elapsed_s=elapsed_s,
            exit_code=EXIT_CODES[reason],
            message=f"autostop: {text} at {clock(elapsed_s)}",
        )


def _reason(condition: Condition) -> str:
    if condition.kind == "latency":
        return "latency"
    return "dropped" if condition.metric == "dropped" else "errors"


def clock(elapsed_s: float) -> str:
    """Time into the run as a clock: ``00:37``, ``1:02:05`` past an hour.

    >>> clock(37.2), clock(3725)
    ('00:37', '1:02:05')
    """
    total = round(elapsed_s)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"
