"""Monitor metrics in autostop and thresholds: ``monitor.NAME.METRIC OP VALUE [for Ns]``.

A condition holds at a second when the monitor's sample of that second has the metric and it
passes the comparison; it *held* once it did so for ``for_s`` seconds in a row (the autostop
rule's ``window_s`` when the text gives no ``for``; 1 s for a threshold). A gap, or a sample
without the metric, ends a streak. A threshold on a monitor passes unless its condition failed
that long in a row; what it measured is the worst value the run saw.

>>> from horde.plan.monitors import parse_monitor_condition
>>> from horde.store import MonitorSample
>>> watch = ConditionStreak(parse_monitor_condition("monitor.db.cpu.busy_percent > 95 for 2s"), default_for_s=10)
>>> [watch.observe(MonitorSample("db", s, float(s), 0.0, {"cpu.busy_percent": v})) for s, v in [(1, 97), (2, 50), (3, 96), (4, 99)]]
[None, None, None, 3]
"""

from __future__ import annotations

from collections.abc import Sequence

from horde.plan.monitors import MonitorCondition
from horde.store import MonitorSample


class ConditionStreak:
    """Follows one condition over a monitor's samples (in order of second)."""

    def __init__(self, condition: MonitorCondition, *, default_for_s: int, holds_when_true: bool = True) -> None:
        self.condition = condition
        self.for_s = condition.for_s or default_for_s
        self._holds_when_true = holds_when_true
        self._first: int | None = None
        self._last_second = 0
        #: The value at the last sample that had the metric.
        self.last_value: float | None = None
        #: The most extreme value seen while the streak ran.
        self.worst: float | None = None

    def observe(self, sample: MonitorSample) -> int | None:
        """The streak's first second once it has lasted ``for_s`` seconds, else None."""
        if sample.monitor != self.condition.monitor:
            return None
        value = None if sample.values is None else sample.values.get(self.condition.metric)
        interval = max(1, sample.second - self._last_second) if self._last_second else 1
        self._last_second = sample.second
        if value is None or self.condition.holds(value) != self._holds_when_true:
            self._first, self.worst = None, None
            return None
        self.last_value = value
        if self._first is None:
            self._first, self.worst = sample.second, value
        self.worst = (
            max(self.worst or value, value) if self.condition.op in (">", ">=") else min(self.worst or value, value)
        )
        held = sample.second - self._first + interval
        return self._first if held >= self.for_s else None


def judge_monitor_condition(
    condition: MonitorCondition, samples: Sequence[MonitorSample]
) -> tuple[bool, float | None, int | None]:
    """A threshold's verdict on a monitor's samples: (passed, worst value, second it first
    failed for long enough). No sample with the metric at all is a failure with no value."""
    streak = ConditionStreak(condition, default_for_s=1, holds_when_true=False)
    values = [
        sample.values[condition.metric]
        for sample in samples
        if sample.values is not None and condition.metric in sample.values
    ]
    if not values:
        return False, None, None
    worst = max(values) if condition.op in ("<", "<=") else min(values)
    for sample in samples:
        failed_at = streak.observe(sample)
        if failed_at is not None:
            return False, worst, failed_at
    return True, worst, None
