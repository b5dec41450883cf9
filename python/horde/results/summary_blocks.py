"""The blocks a run's summary gets as the run ends, each declared once: what its observers judged
(``control.observers``: thresholds, autostop, the capacity answer, the monitors, a cluster's
spread) and what a command adds (``sight``, the push ``outputs``), with the Little's-law check
the summary makes itself.

Every producer is typed by these declarations (mypy checks the keys it writes), and the test
suite checks every summary a run stores in it against them (``tests/conftest.py``). Records
inside a block that follow their own module's shape (a find-max step, a steering's readings, a
diagnosis finding) are declared there, and are mappings here.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ThresholdVerdict(TypedDict):
    """One threshold judged on the whole run (``control.thresholds``)."""

    condition: str
    step: str | None
    scenario: str | None
    #: In the condition's unit, rounded to 0.001; None when nothing was measured.
    measured: float | None
    passed: bool
    message: str


class AutostopBlock(TypedDict):
    """The autostop rule that ended the run, and what it measured (``control.autostop``)."""

    when: str
    window_s: float
    after_s: float
    step: str | None
    scenario: str | None
    reason: str
    measured: float
    unit: str
    second: int
    elapsed_s: float
    exit_code: int
    message: str


class CapacityBlock(TypedDict, total=False):
    """The capacity answer: a steering's (``method``: ``find_max``, ``target_response_time``),
    or a plain run's own throughput asked a capacity question (``measured_run``); then the
    answers to the question (users supported, instances for a peak) and, with monitors, what
    broke first. Which keys a block has follows from its method."""

    method: str
    #: The answer: the successful requests a second at the level found (None: not found).
    max_rps: float | None
    #: A gateway's answer, in messages a second, when the run sent messages.
    max_messages_per_s: float | None
    latency_ms_at_max: float | None
    level_at_max: float | None
    percentile: float
    latency_basis: str
    level_unit: str
    samples_needed: int
    set_aside_s: int
    notes: list[str]
    saturation_reason: str | None
    stopped_by_steering: bool
    # find-max
    search: str
    overloaded_rps: float | None
    felt_latency_ms_at_max: float | None
    first_saturated_level: float | None
    bracket_percent: float | None
    precision_percent: float | None
    first_saturated_step: dict[str, Any] | None
    ended_because: str
    answer_after_s: int | None
    sight: dict[str, Any] | None
    steps: list[dict[str, Any]]
    # target response time
    by: str
    target_ms: float
    outcome: str
    limit: str | None
    converged_after_s: int | None
    held_s: int
    held_window_s: int
    tracked_s: int
    held_percent: float | None
    highest_under_target: dict[str, Any] | None
    lowest_over_target: dict[str, Any] | None
    sentence: str
    readings: list[dict[str, Any]]
    history: list[dict[str, Any]]
    # the capacity question's answers (``control.capacity``)
    rate_unit: str
    per_user_rate: float
    users_supported: int
    peak_rps: float
    headroom_percent: float
    instances_needed: int
    instances_model: str
    # beside a steered answer, with monitors (``control.broke_first``)
    what_broke_first: dict[str, Any] | None


class MonitorsBlock(TypedDict):
    """What the monitors saw over the run (``monitors.summary``): each source's samples, gaps
    and headline figures, their warnings and the diagnosis, and what sampling cost."""

    sources: dict[str, dict[str, Any]]
    warnings: list[str]
    diagnosis: list[dict[str, Any]]
    #: Each source's sampling cost (CPU seconds and the like) on the generator.
    cost: NotRequired[dict[str, dict[str, float]]]


class ClusterBlock(TypedDict, total=False):
    """How a cluster run's load was spread (``cluster.coordinator``): the provisioning's report,
    each generator, their start skew and the generators lost."""

    provision: str
    slots: int
    memory_warnings: list[str]
    calibration: dict[str, Any] | None
    capacity_rps_per_worker: float | None
    #: The start the generators agreed on (epoch seconds).
    agreed_start: float
    generators: list[dict[str, Any]]
    max_start_skew_ms: float | None
    lost: list[dict[str, Any]]
    lost_share: float
    stopped_for_loss: bool


class SightBlock(TypedDict):
    """A sighting run's reading (``control.sight``): per step its median, p95 and the rate one
    VU gets out of it, per VU the request rate, and the find-max it suggests."""

    duration_s: float
    vu_rps: float
    iteration_s: float | None
    steps: dict[str, dict[str, Any]]
    suggestion: dict[str, Any]


class OutputBlock(TypedDict):
    """What one push output (``--out``) delivered (``sinks.push``)."""

    kind: str
    url: str
    pushed: int
    failed: int
    series_not_sent: int
    last_error: str | None


class LittlesLawBlock(TypedDict, total=False):
    """Little's law over the run's steady seconds (``results.littles_law``): the VUs the figures
    account for against those measured, the gap, and whether they agree (None: not known, with
    why)."""

    model: str | None
    seconds: int
    tolerance_percent: float
    consistent: bool | None
    why: str | None
    expected: float
    measured: float
    gap_percent: float | None
    throughput_per_s: float
    response_time_ms: float | None
    think_time_ms: float | None
    in_flight: float
    pool_connections: int | None
    #: With a gap: the time each think time or pacing wait ran over, in ms.
    overrun_ms_per_pause: float | None
