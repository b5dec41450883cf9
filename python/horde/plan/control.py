"""The parts of a plan the control plane acts on and the engine never reads: thresholds judged on
the whole run, autostop rules watched each second, and steering (find-max, target response
time) that moves the load level while the run goes.

Conditions are written the way engineers say them, ``p95 < 200ms``, ``errors < 1%``,
``rps > 100``, and parsed here once, so a typo is a located plan error before any load is sent:

>>> parse_condition("p95 < 200ms")
Condition(metric='p95', op='<', value=200.0, text='p95 < 200ms')
>>> parse_condition("p99.9 <= 1.5s").value, parse_condition("errors.timeout < 0.5%").metric
(1500.0, 'errors.timeout')
>>> parse_condition("rps >= 1000").value
1000.0

Latency values are held in milliseconds and shares in percent, whatever unit was written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from horde.plan.common import MAX_RATE_PER_S, MAX_STAGE_DURATION_S, MAX_VUS, custom, raise_located
from horde.plan.monitor_figures import unknown_figure
from horde.plan.monitors import MONITOR_CONDITION_HINT, MonitorCondition, is_monitor_condition, parse_monitor_condition
from horde.plan.message import ConnectStep, PingStep, ReceiveStep, SendStep, StreamStep
from horde.plan.sql import SqlStep
from horde.plan.steps import GroupStep, HttpStep, ParallelStep

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)

#: Latency metrics: a percentile ``pNN`` or ``pNN.N``, or the mean, min or max, in ms.
_LATENCY = re.compile(r"^(p(\d{1,2}(\.\d{1,3})?|100)|mean|min|max)$")
#: Share metrics, in percent: every error, one kind of error, or dropped arrivals.
_SHARE = re.compile(r"^(errors(\.[a-z0-9_]+)?|dropped)$")
#: Count and rate metrics: requests in the whole scope, and requests (or successful ones) per s.
_AMOUNT = ("requests", "rps", "ok_rps")
_OPS = ("<=", ">=", "<", ">")
_CONDITION = re.compile(r"^\s*([a-z][a-z0-9_.]*)\s*(<=|>=|<|>)\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z%/]*)\s*$")
_LATENCY_UNITS = {"": 1.0, "ms": 1.0, "s": 1000.0, "us": 0.001}

CONDITION_HINT = (
    "write METRIC OP VALUE: p95 < 200ms, p99.9 < 1s, mean < 50ms, max < 2s, errors < 1%, "
    "errors.timeout < 0.1%, dropped < 1%, rps > 100, ok_rps > 100, requests > 1000"
)


AUTOSTOP_HINT = (
    "write METRIC OP VALUE with a latency or share metric (p95 > 500ms, errors > 5%, "
    "errors.timeout > 1%, dropped > 1%), or no_success, or generator_saturated"
)


@dataclass(frozen=True)
class Condition:
    """A parsed ``METRIC OP VALUE``; ``value`` in ms for latency, percent for shares."""

    metric: str
    op: str
    value: float
    text: str

    @property
    def kind(self) -> str:
        """``latency``, ``share`` or ``amount``."""
        if _LATENCY.match(self.metric):
            return "latency"
        if _SHARE.match(self.metric):
            return "share"
        return "amount"

    @property
    def percentile(self) -> float | None:
        """The percentile of a ``pNN`` metric (``max`` is 100, ``min`` 0), else None."""
        if self.metric.startswith("p"):
            return float(self.metric[1:])
        return {"max": 100.0, "min": 0.0}.get(self.metric)

    def holds(self, measured: float) -> bool:
        """Whether ``measured`` (in the condition's units) satisfies the comparison."""
        return {
            "<": measured < self.value,
            "<=": measured <= self.value,
            ">": measured > self.value,
            ">=": measured >= self.value,
        }[self.op]


def parse_condition(text: str) -> Condition:
    """Parses ``METRIC OP VALUE[UNIT]``; ValueError with a message saying what is wrong."""
    match = _CONDITION.match(text.lower())
    if match is None:
        raise ValueError(f"'{text}' is not a condition")
    metric, op, number, unit = match.groups()
    value = float(number)
    if _LATENCY.match(metric):
        if metric.startswith("p") and float(metric[1:]) > 100:
            raise ValueError(f"'{metric}': a percentile is at most 100")
        if unit not in _LATENCY_UNITS:
            raise ValueError(f"'{unit}' is not a latency unit in '{text}' (use ms, s or us)")
        value *= _LATENCY_UNITS[unit]
    elif _SHARE.match(metric):
        if unit not in ("%", ""):
            raise ValueError(f"'{metric}' is a share in percent; '{unit}' is not a unit for it")
        if value > 100:
            raise ValueError(f"'{metric}' is a share in percent, at most 100 (got {number})")
    elif metric in _AMOUNT:
        if unit not in ("", "/s") or (metric == "requests" and unit):
            raise ValueError(f"'{unit}' is not a unit for '{metric}'")
    else:
        raise ValueError(f"'{metric}' is not a metric")
    return Condition(metric=metric, op=op, value=value, text=text.strip())


def _checked_monitor_condition(text: str) -> str:
    try:
        parse_monitor_condition(text)
    except ValueError as error:
        raise custom("condition", str(error), MONITOR_CONDITION_HINT) from None
    return text.strip()


def _checked_condition(text: str, *, allowed: tuple[str, ...], hint: str = CONDITION_HINT) -> str:
    try:
        condition = parse_condition(text)
    except ValueError as error:
        raise custom("condition", str(error), hint) from None
    if condition.kind not in allowed:
        raise custom(
            "condition", f"'{condition.metric}' cannot be used here (use a {' or '.join(allowed)} metric)", hint
        )
    return text.strip()


class Threshold(BaseModel):
    """A pass/fail condition judged on the whole run once it ends (or on one step or group)."""

    model_config = _STRICT

    condition: str = Field(description="METRIC OP VALUE, e.g. 'p95 < 200ms', 'errors < 1%', 'rps > 100'")
    step: str | None = Field(default=None, description="judge only this step or group (by name); default: every step")
    scenario: str | None = Field(default=None, description="only this scenario's steps; default: every scenario")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return {"condition": data} if isinstance(data, str) else data

    # The condition parsed once, when the plan is checked, and carried to where it is judged: on
    # the run's figures, or on a monitor's samples.
    _parsed: Condition | None = PrivateAttr(default=None)
    _monitor_parsed: MonitorCondition | None = PrivateAttr(default=None)

    @field_validator("condition")
    @classmethod
    def _parse(cls, text: str) -> str:
        if is_monitor_condition(text):
            return _checked_monitor_condition(text)
        return _checked_condition(text, allowed=("latency", "share", "amount"))

    @model_validator(mode="after")
    def _keep_parsed(self) -> Threshold:
        if is_monitor_condition(self.condition):
            self._monitor_parsed = parse_monitor_condition(self.condition)
        else:
            self._parsed = parse_condition(self.condition)
        return self

    @property
    def monitor_condition(self) -> MonitorCondition | None:
        """The condition when it reads a monitor's metric (judged on its samples), else None."""
        if not is_monitor_condition(self.condition):
            return None
        return self._monitor_parsed if self._monitor_parsed is not None else parse_monitor_condition(self.condition)

    @property
    def parsed(self) -> Condition:
        """The condition, parsed (a threshold built without validation is parsed here)."""
        return self._parsed if self._parsed is not None else parse_condition(self.condition)


#: The things autostop watches besides a METRIC OP VALUE condition.
AUTOSTOP_EVENTS = ("no_success", "generator_saturated")


class AutostopRule(BaseModel):
    """Stops the run when its condition holds over a sliding window of the last ``window_s``."""

    model_config = _STRICT

    when: str = Field(
        description="METRIC OP VALUE over the window (p95 > 500ms, errors > 5%, errors.timeout > 1%, "
        "dropped > 1%), or 'no_success' (no successful response in the window), or "
        "'generator_saturated' (the generator's CPU or timers over their limits the whole window)"
    )
    window_s: int = Field(default=10, ge=1, le=3600, description="the sliding window, in whole seconds; 1 to 3600")
    after_s: float = Field(
        default=0, ge=0, le=MAX_STAGE_DURATION_S, description="not before this many seconds into the run (warm-up)"
    )
    step: str | None = Field(default=None, description="watch only this step or group; default: every step")
    scenario: str | None = Field(default=None, description="watch only this scenario's steps; default: every scenario")

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return {"when": data} if isinstance(data, str) else data

    # ``when`` parsed once, when the plan is checked (None for an event such as 'no_success'), as
    # a condition on the run's figures or on a monitor's samples.
    _parsed: Condition | None = PrivateAttr(default=None)
    _monitor_parsed: MonitorCondition | None = PrivateAttr(default=None)

    @field_validator("when")
    @classmethod
    def _parse(cls, text: str) -> str:
        if text.strip() in AUTOSTOP_EVENTS:
            return text.strip()
        if is_monitor_condition(text):
            return _checked_monitor_condition(text)
        return _checked_condition(text, allowed=("latency", "share"), hint=AUTOSTOP_HINT)

    @model_validator(mode="after")
    def _keep_parsed(self) -> AutostopRule:
        self._parsed = (
            None if self.when in AUTOSTOP_EVENTS or is_monitor_condition(self.when) else parse_condition(self.when)
        )
        self._monitor_parsed = parse_monitor_condition(self.when) if is_monitor_condition(self.when) else None
        return self

    @property
    def condition(self) -> Condition | None:
        """``when`` as a parsed condition; None when it names an event or reads a monitor."""
        if self._parsed is None and self.when not in AUTOSTOP_EVENTS and not is_monitor_condition(self.when):
            return parse_condition(self.when)
        return self._parsed

    @property
    def monitor_condition(self) -> MonitorCondition | None:
        """``when`` when it reads a monitor's metric, else None."""
        if not is_monitor_condition(self.when):
            return None
        return self._monitor_parsed if self._monitor_parsed is not None else parse_monitor_condition(self.when)


#: Find-max's step length when the plan gives none: a search's steps are short (it takes few),
#: a stepped ramp's are the seed's 30 s.
SEARCH_STEP_DURATION_S = 5.0
STEPPED_STEP_DURATION_S = 30.0


class FindMax(BaseModel):
    """Finds the knee: the highest level the target serves before it saturates.

    Without ``step`` it searches: a sighting shot sizes the start (unless ``start`` is given),
    the level grows by ``growth`` each step until one saturates, then bisection between the last
    good and the first saturated level closes in to ``precision_percent``; the steps taken grow
    with the logarithm of the answer. With ``step`` it climbs a stepped ramp (``start``,
    ``start + step``...) as the seed's teams do by hand, then refines in quarter steps.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, title="FindMax")

    type: Literal["find_max"] = Field(description="steering: 'find_max'")
    start: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_S,
        description="the first step's level: arrivals/s (open) or VUs (closed); default: sized by a sighting "
        "shot (open) or 1 VU (closed)",
    )
    step: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_S,
        description="a stepped ramp: how much each step adds; default: none, the level grows geometrically "
        "and bisection finds the knee",
    )
    step_duration_s: float | None = Field(
        default=None,
        ge=2,
        le=3600,
        description=f"how long each step holds, in seconds; >= 2; default {SEARCH_STEP_DURATION_S:g} for a search, "
        f"{STEPPED_STEP_DURATION_S:g} for a stepped ramp",
    )
    growth: float = Field(
        default=2.0,
        ge=1.1,
        le=10,
        description="search: the factor each step multiplies the level by until one saturates",
    )
    precision_percent: float = Field(
        default=3.0,
        ge=0.5,
        le=50,
        description="search: stop once the last good and first saturated levels are this close (percent of the good one)",
    )
    limit: float | None = Field(default=None, gt=0, le=MAX_RATE_PER_S, description="never go above this level")
    percentile: float = Field(default=95, gt=0, le=100, description="the latency percentile judged")
    latency_limit_ms: float | None = Field(default=None, gt=0, description="saturated once the percentile passes this")
    error_limit_percent: float = Field(default=5, ge=0, le=100, description="saturated once errors pass this share")
    refine: bool = Field(
        default=True,
        description="stepped ramp: after the first saturation, climb again from the last good step in quarter steps",
    )
    scenarios: list[str] = Field(default_factory=list, description="the scenarios whose level is steered; default: all")

    @property
    def searching(self) -> bool:
        """Whether this is a search (no ``step``) rather than a stepped ramp."""
        return self.step is None

    @property
    def step_length_s(self) -> float:
        """How long each step holds: the plan's, or the default of its method."""
        if self.step_duration_s is not None:
            return self.step_duration_s
        return SEARCH_STEP_DURATION_S if self.searching else STEPPED_STEP_DURATION_S


class TargetResponseTime(BaseModel):
    """Finds the highest level whose latency percentile is at or under a target, and holds it
    there while the system changes; reports the rate that held it and for how long, or which
    case kept it from holding (see ``horde.control.target_response_time``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, title="TargetResponseTime")

    type: Literal["target_response_time"] = Field(description="steering: 'target_response_time'")
    target_ms: float = Field(gt=0, le=3_600_000, description="the response time to hold, in ms")
    percentile: float = Field(default=95, gt=0, le=100, description="which percentile is held")
    steps: list[str] = Field(
        default_factory=list, description="the steps or groups whose latency is held; default: all"
    )
    by: Literal["level", "pace"] = Field(
        default="level",
        description="what moves: 'level' (the VUs of closed scenarios, the arrival rate of open ones) or 'pace' "
        "(closed scenarios keep their VUs, and so their connections and logins; each VU's think times and pacing "
        "are divided by the pace, 1 being the plan's own)",
    )
    start: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_S,
        description="the level to start from: VUs (closed), arrivals/s (open) or a pace; default 1 VU, 10/s or pace 1",
    )
    min: float = Field(
        default=1, gt=0, le=MAX_RATE_PER_S, description="never go below this level (a pace: default 0.01)"
    )
    max: float = Field(
        default=MAX_VUS, gt=0, le=MAX_RATE_PER_S, description="never go above this level (a pace: default 100)"
    )
    duration_s: float = Field(
        default=120, ge=5, le=MAX_STAGE_DURATION_S, description="how long the run steers, in seconds"
    )
    scenarios: list[str] = Field(default_factory=list, description="the scenarios whose level is steered; default: all")

    @model_validator(mode="before")
    @classmethod
    def _pace_bounds(cls, data: Any) -> Any:
        # A pace is a factor around 1, not a count: its own defaults for the range.
        if isinstance(data, dict) and data.get("by") == "pace":
            data = {"min": PACE_MIN, "max": PACE_MAX, **data}
        return data


#: The range of a steered pace (a factor on the plan's think times and pacing).
PACE_MIN = 0.01
PACE_MAX = 100.0


Steer = Annotated[Union[FindMax, TargetResponseTime], Field(discriminator="type")]


#: Message steps are measured as requests are (thresholds and autostop name them).
_MESSAGE_STEPS = (ConnectStep, SendStep, ReceiveStep, PingStep, StreamStep)


def check_control_names(plan: Any) -> None:
    """Every step, group and scenario a threshold, autostop rule or steering names exists, and
    the steered scenarios share one workload model (their level is one number: VUs or a rate).

    Raises a located ValidationError listing every problem (called from ``Plan``'s validator).
    """
    measured: dict[str, set[str]] = {
        scenario.name: {
            step.name
            for step in scenario.all_steps()
            if isinstance(step, (HttpStep, GroupStep, ParallelStep, SqlStep, *_MESSAGE_STEPS))
        }
        for scenario in plan.scenarios
    }
    errors: list[Any] = []

    def check_scope(loc: tuple[str | int, ...], step: str | None, scenario: str | None) -> None:
        if scenario is not None and scenario not in measured:
            errors.append(
                (
                    (*loc, "scenario"),
                    scenario,
                    custom(
                        "unknown_scenario",
                        f"no scenario is named '{scenario}'",
                        f"name one of: {', '.join(sorted(measured))}",
                    ),
                )
            )
            return
        if step is None:
            return
        names = measured[scenario] if scenario is not None else set().union(*measured.values())
        if step not in names:
            errors.append(
                (
                    (*loc, "step"),
                    step,
                    custom(
                        "unknown_step",
                        f"no step or group is named '{step}'" + (f" in scenario '{scenario}'" if scenario else ""),
                        "name a request step or a group: " + ", ".join(sorted(names)[:12]),
                    ),
                )
            )

    for index, threshold in enumerate(plan.thresholds):
        check_scope(("thresholds", index), threshold.step, threshold.scenario)
    for index, rule in enumerate(plan.autostop):
        check_scope(("autostop", index), rule.step, rule.scenario)
    monitors = {monitor.name: monitor for monitor in getattr(plan, "monitors", [])}
    watched = [
        (("thresholds", index), t.monitor_condition, t.step or t.scenario, "condition")
        for index, t in enumerate(plan.thresholds)
    ]
    watched += [
        (("autostop", index), r.monitor_condition, r.step or r.scenario, "when")
        for index, r in enumerate(plan.autostop)
    ]
    for loc, condition, scoped, key in watched:
        if condition is None:
            continue
        if condition.monitor not in monitors:
            errors.append(
                (
                    (*loc, key),
                    condition.text,
                    custom(
                        "unknown_monitor",
                        f"no monitor is named '{condition.monitor}'",
                        f"name one of the plan's monitors: {', '.join(sorted(monitors))}"
                        if monitors
                        else "add it under monitors: (or with --monitor NAME=host)",
                    ),
                )
            )
        elif (unknown := unknown_figure(monitors[condition.monitor], condition.metric)) is not None:
            errors.append(((*loc, key), condition.text, custom("unknown_monitor_figure", *unknown)))
        if scoped is not None:
            errors.append(
                (
                    (*loc, "step"),
                    scoped,
                    custom(
                        "monitor_scope",
                        "a monitor's condition has no step or scenario",
                        "remove step and scenario from it",
                    ),
                )
            )
    steer = plan.steer
    if steer is not None:
        for index, name in enumerate(steer.scenarios):
            if name not in measured:
                errors.append(
                    (
                        ("steer", "scenarios", index),
                        name,
                        custom(
                            "unknown_scenario",
                            f"no scenario is named '{name}'",
                            f"name one of: {', '.join(sorted(measured))}",
                        ),
                    )
                )
        if (
            isinstance(steer, FindMax)
            and steer.limit is not None
            and steer.start is not None
            and steer.start > steer.limit
        ):
            errors.append(
                (
                    ("steer", "start"),
                    steer.start,
                    custom(
                        "steer_range",
                        f"start ({steer.start:g}) is above limit ({steer.limit:g})",
                        "give start <= limit",
                    ),
                )
            )
        if isinstance(steer, TargetResponseTime):
            for index, name in enumerate(steer.steps):
                if name not in set().union(*measured.values()):
                    errors.append(
                        (
                            ("steer", "steps", index),
                            name,
                            custom(
                                "unknown_step",
                                f"no step or group is named '{name}'",
                                "name request steps or groups of the plan",
                            ),
                        )
                    )
            if steer.min > steer.max:
                errors.append(
                    (
                        ("steer", "min"),
                        steer.min,
                        custom(
                            "steer_range",
                            f"min ({steer.min:g}) is above max ({steer.max:g})",
                            "give min <= start <= max",
                        ),
                    )
                )
            if steer.by == "pace":
                for index, scenario in enumerate(plan.scenarios):
                    if steer.scenarios and scenario.name not in steer.scenarios:
                        continue
                    if scenario.workload.type != "closed":
                        errors.append(
                            (
                                ("scenarios", index, "workload", "type"),
                                scenario.workload.type,
                                custom(
                                    "steer_pace_open",
                                    f"scenario '{scenario.name}' is open: steering by pace keeps a "
                                    "population of VUs, and an open model's arrivals set its own pace",
                                    "give it a closed workload (VUs), or steer by level (drop steer.by)",
                                ),
                            )
                        )
                    elif scenario.pacing_s is None and not any(
                        getattr(step, "think_time", None) is not None for step in scenario.all_steps()
                    ):
                        errors.append(
                            (
                                ("scenarios", index),
                                scenario.name,
                                custom(
                                    "steer_pace_no_pause",
                                    f"scenario '{scenario.name}' has no think time or pacing: "
                                    "its pace has nothing to scale",
                                    "add pacing_s or think times, or steer by level (drop steer.by)",
                                ),
                            )
                        )
        steered = [s for s in plan.scenarios if not steer.scenarios or s.name in steer.scenarios]
        models = {s.workload.type for s in steered}
        if len(models) > 1:
            errors.append(
                (
                    ("steer", "scenarios"),
                    steer.scenarios,
                    custom(
                        "steer_mixed_models",
                        "the steered scenarios mix closed and open workload models",
                        "steer only closed scenarios (a VU count) or only open ones (a rate): list them in steer.scenarios",
                    ),
                )
            )
    if errors:
        raise_located("Plan", errors)


class Generators(BaseModel):
    """How a run spread over several generator processes (``horde run --cluster``) is sized, and
    what happens when one of them is lost. Ignored by a run on one generator."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, title="Generators")

    count: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="how many generators; default: as many as the plan needs (VUs and connections "
        "against each generator's open-file limit, the rate against its capacity), one per node first",
    )
    capacity_rps: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_S,
        description="requests per second one generator can send; default: measured by a short "
        "calibration on each generator before the run",
    )
    expected_rps: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_S,
        description="the plan's peak requests per second, for sizing closed models (an open model's "
        "peak rate is known from its stages)",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="worker threads per generator; default: the CPUs of its node shared among the "
        "generators placed there",
    )
    on_lost: Literal["continue", "stop"] = Field(
        default="continue",
        description="when a generator or its node is lost: 'continue' (default) with the others, the "
        "lost share recorded, or 'stop' the run",
    )
