"""Thresholds judged on a whole run: each one passes or fails on the figures of its scope.

A threshold with nothing to measure fails: ``p95 < 200ms`` on a step that never ran, or
``errors < 1%`` with no requests, would otherwise pass a run that tested nothing.

>>> from horde.engine.histogram import from_values
>>> from horde.plan.control import Threshold
>>> second = {"elapsed_s": 1.0, "interval_s": 1.0, "final": False, "iterations": 4,
...           "dropped_arrivals": 0, "steps": [
...     {"scenario": "shop", "step": "login", "kind": "request", "requests": 4, "ok": 4,
...      "errors": {}, "histogram": from_values([150_000] * 3 + [900_000])}]}
>>> [verdict.message for verdict in judge([Threshold(condition="p50 < 200ms", step="login"),
...                                        Threshold(condition="max < 500ms")], [second])]
['p50 < 200ms [step login] passed: 150 ms', 'max < 500ms failed: 900.1 ms, not < 500 ms']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from horde.control.measure import Figures, Scope, format_limit, format_value, measure, unit_of
from horde.engine.snapshot import Snapshot
from horde.monitors import judge_monitor_condition
from horde.plan.control import Condition, Threshold
from horde.plan.monitors import MonitorCondition
from horde.store import MonitorSample
from horde.results.summary_blocks import ThresholdVerdict


@dataclass(frozen=True)
class Verdict:
    """How one threshold fared."""

    #: The threshold's condition as written: ``p95 < 200ms``.
    condition: str
    step: str | None
    scenario: str | None
    #: The scope in words: ``step login``, ``all requests``.
    scope: str
    #: The measured value in ``unit``; None when there was nothing to measure.
    measured: float | None
    #: ``ms``, ``%``, ``req/s`` or ``""`` (a count).
    unit: str
    #: The comparison asked for, in the unit: ``< 200 ms``.
    limit: str
    passed: bool
    #: One line: ``p95 < 200ms [step login] failed: 812.4 ms, not < 200 ms``.
    message: str

    @property
    def name(self) -> str:
        """The threshold with its scope when it has one: ``p95 < 200ms [step login]``."""
        return _name(self.condition, self.step, self.scenario, self.scope)


def _name(condition: str, step: str | None, scenario: str | None, scope: str) -> str:
    return condition if step is None and scenario is None else f"{condition} [{scope}]"


def judge(
    thresholds: Sequence[Threshold],
    snapshots: Iterable[Snapshot],
    monitor_samples: Mapping[str, Sequence[MonitorSample]] | None = None,
) -> list[Verdict]:
    """The verdict of each threshold over ``snapshots`` (the whole run, final one included),
    in the thresholds' order; a threshold on a monitor is judged on ``monitor_samples``."""
    snapshots = list(snapshots)
    # Several thresholds on one scope (p95 and errors on a step) share one merge.
    figures_by_scope: dict[Scope, Figures] = {}
    verdicts = []
    for threshold in thresholds:
        if (watched := threshold.monitor_condition) is not None:
            verdicts.append(_monitor_verdict(watched, (monitor_samples or {}).get(watched.monitor, [])))
            continue
        scope = Scope.of(scenario=threshold.scenario, step=threshold.step)
        if scope not in figures_by_scope:
            figures_by_scope[scope] = measure(snapshots, scenario=threshold.scenario, step=threshold.step)
        verdicts.append(_verdict(threshold, scope, figures_by_scope[scope]))
    return verdicts


def _monitor_verdict(condition: MonitorCondition, samples: Sequence[MonitorSample]) -> Verdict:
    passed, worst, failed_at = judge_monitor_condition(condition, samples)
    limit = f"{condition.op} {condition.value:g}"
    if worst is None:
        message = f"{condition.text} failed: monitor {condition.monitor} never gave {condition.metric}"
    elif passed:
        message = f"{condition.text} passed: worst {worst:g}"
    else:
        message = f"{condition.text} failed: not {limit} from second {failed_at} (worst {worst:g})"
    return Verdict(
        condition=condition.text,
        step=None,
        scenario=None,
        scope=f"monitor {condition.monitor}",
        measured=worst,
        unit="",
        limit=limit,
        passed=passed,
        message=message,
    )


def _verdict(threshold: Threshold, scope: Scope, figures: Figures) -> Verdict:
    condition = threshold.parsed
    unit = unit_of(condition)
    measured = figures.value(condition)
    passed = measured is not None and condition.holds(measured)
    limit = format_limit(condition)
    name = _name(condition.text, threshold.step, threshold.scenario, scope.describe())
    if measured is None:
        message = f"{name} failed: {_why_no_value(condition, figures)}"
    elif passed:
        message = f"{name} passed: {format_value(measured, unit)}"
    else:
        message = f"{name} failed: {format_value(measured, unit)}, not {limit}"
    return Verdict(
        condition=condition.text,
        step=threshold.step,
        scenario=threshold.scenario,
        scope=scope.describe(),
        measured=measured,
        unit=unit,
        limit=limit,
        passed=passed,
        message=message,
    )


def _why_no_value(condition: Condition, figures: Figures) -> str:
    if condition.metric in ("rps", "ok_rps"):
        return "no measured time"
    if figures.requests == 0:
        return "no requests in scope"
    # Latency covers requests that got a response; a run where none did measured nothing.
    kinds = sorted(figures.errors.items(), key=lambda item: (-item[1], item[0]))
    why = ", ".join(f"{kind} {count:,}" for kind, count in kinds[:3])
    return f"no response was measured: none of the {figures.requests:,} requests in scope got one" + (
        f" ({why})" if why else ""
    )


def all_passed(verdicts: Iterable[Verdict]) -> bool:
    """Whether every threshold passed (True when there are none)."""
    return all(verdict.passed for verdict in verdicts)


def verdicts_to_json(verdicts: Iterable[Verdict]) -> list[ThresholdVerdict]:
    """The verdicts as the summary JSON keeps them (measured rounded to 0.001 in its unit).

    >>> verdicts_to_json([Verdict("rps > 10", None, None, "all requests", 12.34567, "req/s", "> 10 req/s",
    ...                           True, "rps > 10 passed: 12.35 req/s")])
    [{'condition': 'rps > 10', 'step': None, 'scenario': None, 'measured': 12.346, 'passed': True, 'message': 'rps > 10 passed: 12.35 req/s'}]
    """
    return [
        {
            "condition": verdict.condition,
            "step": verdict.step,
            "scenario": verdict.scenario,
            "measured": None if verdict.measured is None else round(verdict.measured, 3),
            "passed": verdict.passed,
            "message": verdict.message,
        }
        for verdict in verdicts
    ]
