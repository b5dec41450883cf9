"""Comparing runs: a per-step statistical verdict between two runs, and trends across runs.

The verdict
-----------
For each step (and for all requests together) the two runs' latency distributions are the exact
merges of their stored HDR histograms. They are compared with the **Mann–Whitney U test**
(two-sided, normal approximation with tie correction and continuity correction), computed over
the histogram buckets: every request in a bucket shares that bucket's rank (a tie), so the test
is exact about what the histograms hold and costs one pass over the buckets, whatever the
number of requests. It asks whether a request of one run tends to take longer than a request of
the other, without assuming any shape of distribution (latency is skewed and often multi-modal,
so a t-test on means would be wrong).

With thousands of requests the test finds *any* shift significant, a 0.2 % one included. So a
step is judged different only when both hold:

1. the test's p-value is below ``alpha`` (default 0.01), and
2. the shift is practically relevant: the median (p50) or p90 moved *in the direction the test
   found* by more than ``min_relative_change`` (default 5 %) and by more than
   ``min_absolute_change_ms`` (default 0.1 ms).

Relevance is judged on relative percentile changes, not on the test's own effect size (the
probability of superiority, reported beside it), because that measures overlap, not size: two
runs against a 20 ms delay whose overhead differs by 0.1 ms barely overlap, and would score
close to 1, though nobody cares about 0.5 %. p50 and p90 are used, not p99, because they are
stable at the request counts of a short run and cover both the typical request and the slow
part users notice; p95/p99 changes are reported for the reader. The absolute floor keeps
sub-millisecond steps (an error answered in 50 µs) from being flagged for a few microseconds of
the machine's scheduling noise, which is a large share of so short a time. A step with fewer than
``min_requests`` requests in either run is ``not enough data`` (the normal approximation needs a
few dozen observations, and a handful of requests says little anyway).

Verdicts: ``faster``, ``slower`` (the candidate against the baseline), ``no significant
change``, ``not enough data``.

Gating a build on it
--------------------
``horde compare A B --fail-on p95:10%`` exits 18 when some step regressed: a :class:`Gate` names
the figure (p50, p90, p95, p99, mean, errors, rps) and how much worse it may get. A step fails
the gate when it is worse *significantly* and *by more than the margin*: the margin takes the
place of ``min_relative_change`` for the figure the user cares about (a p99 gate must catch a
slower tail even when the median held), while significance comes from a test:

- latency: the figure grew by more than the margin and by more than ``min_absolute_change_ms``,
  and the rank test above finds the candidate slower (p < ``alpha``) or, for a percentile, more
  of the candidate's requests lie above the baseline's percentile than the baseline's own share
  (a two-proportion test over the histograms' buckets, p < ``alpha``: a slower tail rarely
  moves the rank test, which weighs every request alike, so a p99 gate needs a test of its own;
  either test may say so, so a gate's chance of a false alarm is at most twice ``alpha``);
- errors: the error share grew by more than the margin, in percentage points, and the
  two-proportion test (:func:`two_proportion_p_value`) on the error counts gives p < ``alpha``;
- rps: throughput fell by more than the margin and the rank test over the full seconds'
  request counts (``StepComparison.rate_test``) finds the candidate's seconds lower (seconds
  are the samples: three against three give p = 0.08 at best, so a short run cannot fail it).

A step with fewer than ``min_requests`` requests in either run is never judged a regression.

>>> from horde.engine.histogram import Bucket
>>> same = [Bucket(1000, 1000, 50), Bucket(2000, 2001, 50)]
>>> mann_whitney_u(same, same).p_value
1.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from horde.engine.histogram import Bucket, buckets
from horde.results.stored_run import ALL_REQUESTS, RunResults, StepId, step_names
from horde.store import Store
from horde.results.summary import summarise

Verdict = Literal["faster", "slower", "no significant change", "not enough data"]

TEST_NAME: Final = "Mann-Whitney U (two-sided, normal approximation, tie-corrected)"

#: The percentiles whose relative change decides practical relevance.
RELEVANCE_PERCENTILES: Final = ("p50", "p90")
_REPORTED_PERCENTILES: Final = ("p50", "p90", "p95", "p99")
#: The latency figures compared: the percentiles and the mean (a ``--fail-on mean`` gate).
_COMPARED_LATENCIES: Final = (*_REPORTED_PERCENTILES, "mean")


@dataclass(frozen=True)
class ComparisonRule:
    """When a step counts as different (see the module's docstring for why)."""

    alpha: float = 0.01
    min_relative_change: float = 0.05
    min_absolute_change_ms: float = 0.1
    min_requests: int = 20

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be between 0 and 1 (got {self.alpha})")
        if not self.min_relative_change >= 0.0:
            raise ValueError(f"the minimum relative change must be 0 or more (got {self.min_relative_change})")
        if not self.min_absolute_change_ms >= 0.0:
            raise ValueError(f"the minimum change in ms must be 0 or more (got {self.min_absolute_change_ms})")
        if self.min_requests < 1:
            raise ValueError(f"the minimum request count must be at least 1 (got {self.min_requests})")


@dataclass(frozen=True)
class RankTest:
    """The Mann–Whitney U test of a candidate sample against a baseline sample."""

    n_baseline: int
    n_candidate: int
    #: U of the candidate: the pairs (baseline, candidate) where the candidate's request took
    #: longer, ties counting half.
    u: float
    z: float
    p_value: float
    #: U / (n_baseline × n_candidate): the chance that a candidate request takes longer than a
    #: baseline request (ties half). 0.5: no tendency; above: the candidate is slower.
    probability_of_superiority: float
    name: str = TEST_NAME

    @property
    def p_text(self) -> str:
        """The p-value as a person reads it: ``0.0123``, ``3.2e-45``, and ``< 1e-300`` where it is
        too small for a float (never a bare ``0``, which would claim certainty).

        >>> [RankTest(1, 1, 0.0, 0.0, p, 0.5).p_text for p in (0.01234, 3.2e-45, 0.0)]
        ['0.0123', '3.2e-45', '< 1e-300']
        """
        return "< 1e-300" if self.p_value < 1e-300 else f"{self.p_value:.3g}"


def mann_whitney_u(baseline: Sequence[Bucket], candidate: Sequence[Bucket]) -> RankTest:
    """The Mann–Whitney U test over two histograms' buckets (``horde.engine.histogram``).

    Both histograms must share a bucket layout (all of Horde's do: microseconds at 3
    significant digits): requests in the same bucket are ties. The arithmetic is exact in
    integers up to the square root; ranks are mid-ranks.

    >>> a = [Bucket(v, v, 1) for v in (1, 2, 3, 4, 5)]
    >>> b = [Bucket(v, v, 1) for v in (6, 7, 8, 9, 10)]
    >>> test = mann_whitney_u(a, b)
    >>> test.u, round(test.p_value, 4), test.probability_of_superiority
    (25.0, 0.0122, 1.0)
    """
    counts_a = _counts(baseline)
    counts_b = _counts(candidate)
    n_a = sum(counts_a.values())
    n_b = sum(counts_b.values())
    if n_a == 0 or n_b == 0:
        return RankTest(n_a, n_b, 0.0, 0.0, 1.0, 0.5)
    below = 0  # requests in lower buckets, both runs
    twice_rank_sum_b = 0  # 2 × the candidate's rank sum, so mid-ranks stay integers
    ties = 0  # Σ (t³ − t) over buckets of t requests
    for key in sorted(counts_a.keys() | counts_b.keys()):
        in_a, in_b = counts_a.get(key, 0), counts_b.get(key, 0)
        together = in_a + in_b
        twice_rank_sum_b += in_b * (2 * below + together + 1)
        ties += together**3 - together
        below += together
    total = n_a + n_b
    twice_u = twice_rank_sum_b - n_b * (n_b + 1)
    u = twice_u / 2
    # 12 × the variance of U under no difference, with the tie correction.
    twelve_variance = n_a * n_b * ((total + 1) - ties / (total * (total - 1))) if total > 1 else 0.0
    if twelve_variance <= 0:
        # Every request of both runs in one bucket: nothing to tell them apart.
        return RankTest(n_a, n_b, u, 0.0, 1.0, u / (n_a * n_b))
    deviation = abs(twice_u - n_a * n_b) / 2
    # The continuity correction (half a unit of U) keeps small samples from looking significant.
    z = max(deviation - 0.5, 0.0) / math.sqrt(twelve_variance / 12)
    z = math.copysign(z, twice_u - n_a * n_b)
    p_value = min(1.0, math.erfc(abs(z) / math.sqrt(2)))
    return RankTest(n_a, n_b, u, z, p_value, u / (n_a * n_b))


@dataclass(frozen=True)
class StepFigures:
    """One run's figures for a step, as the run's summary has them (``horde show``)."""

    requests: int
    errors: int
    error_percent: float
    rps: float
    latency_ms: dict[str, float]

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> StepFigures:
        latency = figures["latency_ms"]
        return cls(
            requests=int(figures["requests"]),
            errors=int(figures["errors"]),
            error_percent=float(figures["error_percent"]),
            rps=float(figures["rps"]),
            latency_ms={key: float(latency[key]) for key in (*_COMPARED_LATENCIES, "max")},
        )


@dataclass(frozen=True)
class StepComparison:
    """The verdict on one step (or on all requests) between a baseline and a candidate run."""

    name: str
    kind: str
    baseline: StepFigures | None
    candidate: StepFigures | None
    #: (candidate − baseline) / baseline for p50, p90, p95, p99, mean and rps; None where undefined.
    relative_change: dict[str, float | None]
    #: candidate − baseline for p50, p90, p95, p99 and mean, in ms; None where a run lacks the step.
    change_ms: dict[str, float | None]
    #: The candidate's error share minus the baseline's, in percentage points.
    error_percent_change: float | None
    test: RankTest | None
    verdict: Verdict
    #: Why the verdict is what it is, in a sentence.
    reason: str
    #: The rank test over each run's requests per full second (the final, draining interval
    #: left out): whether the candidate's throughput is lower. None where a run lacks the step.
    rate_test: RankTest | None = None
    #: For p50, p90, p95 and p99: the p-value of the test that a larger share of the candidate's
    #: requests lies above the baseline's percentile than of the baseline's (1.0 where it is not
    #: larger); empty where a run lacks the step.
    tail_tests: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RunComparison:
    """Every step of two runs compared, with the rule used."""

    baseline_id: str
    candidate_id: str
    rule: ComparisonRule
    steps: list[StepComparison] = field(default_factory=list)
    #: Remarks on the comparison as a whole (steps paired by position, steps in one run only).
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``horde compare --json``)."""
        return asdict(self)

    @property
    def different(self) -> bool:
        """Whether any step was judged faster or slower."""
        return any(step.verdict in ("faster", "slower") for step in self.steps)


def compare_runs(baseline: RunResults, candidate: RunResults, rule: ComparisonRule | None = None) -> RunComparison:
    """Compare ``candidate`` against ``baseline``, step by step, then all requests together.

    Steps are matched by scenario and name. Runs of one step each whose names differ (two
    ``horde run --url`` runs of different paths) have that step compared.
    """
    rule = rule or ComparisonRule()
    names_a = step_names(baseline.step_ids())
    names_b = step_names(candidate.step_ids())
    kinds_a, kinds_b = baseline.step_kinds(), candidate.step_kinds()
    notes: list[str] = []
    pairs: list[tuple[StepId | None, StepId | None]]
    shared = [step_id for step_id in names_a if step_id in names_b]
    request_steps_a = [s for s in names_a if kinds_a[s] == "request"]
    request_steps_b = [s for s in names_b if kinds_b[s] == "request"]
    if not shared and len(request_steps_a) == 1 and len(request_steps_b) == 1:
        pairs = [(request_steps_a[0], request_steps_b[0])]
        notes.append(
            f"the runs share no step; their only steps are compared: {names_a[request_steps_a[0]]!r} "
            f"with {names_b[request_steps_b[0]]!r}"
        )
    else:
        pairs = [(s, s if s in names_b else None) for s in names_a]
        pairs += [(None, s) for s in names_b if s not in names_a]
    union_names = step_names([*names_a, *names_b])
    comparisons: list[StepComparison] = []
    histograms_a, histograms_b = baseline.merged_histograms(), candidate.merged_histograms()
    seconds_a, seconds_b = _requests_per_second(baseline), _requests_per_second(candidate)
    for step_a, step_b in pairs:
        if step_a is not None and step_b is not None and step_a != step_b:
            name = f"{names_a[step_a]} vs {names_b[step_b]}"
        else:
            step_id = step_a or step_b
            assert step_id is not None
            name = union_names[step_id]
        figures_a = StepFigures.of(baseline.summary["steps"][names_a[step_a]]) if step_a else None
        figures_b = StepFigures.of(candidate.summary["steps"][names_b[step_b]]) if step_b else None
        kind = kinds_a[step_a] if step_a else kinds_b[step_b] if step_b else "request"
        if step_a is None or step_b is None:
            notes.append(f"step {name!r} is only in the {'candidate' if step_a is None else 'baseline'} run")
        comparisons.append(
            _compare_step(
                name,
                kind,
                figures_a,
                figures_b,
                histograms_a.get(step_a) if step_a else None,
                histograms_b.get(step_b) if step_b else None,
                rule,
                seconds_a.get(step_a) if step_a else None,
                seconds_b.get(step_b) if step_b else None,
            )
        )
    comparisons.append(
        _compare_step(
            ALL_REQUESTS,
            "request",
            StepFigures.of(baseline.summary),
            StepFigures.of(candidate.summary),
            baseline.all_requests_histogram(),
            candidate.all_requests_histogram(),
            rule,
            seconds_a[ALL_REQUESTS],
            seconds_b[ALL_REQUESTS],
        )
    )
    return RunComparison(baseline.run_id, candidate.run_id, rule, comparisons, notes)


def judge(
    test: RankTest, relative_change: dict[str, float | None], change_ms: dict[str, float | None], rule: ComparisonRule
) -> tuple[Verdict, str]:
    """The verdict from the test and the percentile changes (relative, and in ms), with its reason.

    >>> rule = ComparisonRule()
    >>> test = RankTest(1000, 1000, 900_000.0, 30.0, 1e-200, 0.9)
    >>> judge(test, {"p50": 0.5, "p90": 0.4}, {"p50": 10.0, "p90": 8.0}, rule)[0]
    'slower'
    >>> judge(test, {"p50": 0.01, "p90": 0.02}, {"p50": 0.2, "p90": 0.4}, rule)[0]
    'no significant change'
    """
    if min(test.n_baseline, test.n_candidate) < rule.min_requests:
        return "not enough data", (
            f"{min(test.n_baseline, test.n_candidate)} requests in one run; at least {rule.min_requests} are needed"
        )
    shown = ", ".join(
        f"{key} {_percent(relative_change.get(key))}" + _milliseconds(change_ms.get(key))
        for key in RELEVANCE_PERCENTILES
    )
    if test.p_value >= rule.alpha:
        return "no significant change", f"p = {test.p_text} is not below alpha = {rule.alpha:g} ({shown})"
    slower = test.probability_of_superiority > 0.5
    sign = 1.0 if slower else -1.0
    relevant = [
        key
        for key in RELEVANCE_PERCENTILES
        if sign * (relative_change.get(key) or 0.0) > rule.min_relative_change
        and sign * (change_ms.get(key) or 0.0) > rule.min_absolute_change_ms
    ]
    if not relevant:
        return "no significant change", (
            f"significant (p = {test.p_text}) but too small to matter: {shown}; neither moved "
            f"{'up' if slower else 'down'} by more than {rule.min_relative_change:.0%} and {rule.min_absolute_change_ms:g} ms"
        )
    verdict: Verdict = "slower" if slower else "faster"
    return verdict, f"p = {test.p_text} < {rule.alpha:g} and {shown}"


def _compare_step(
    name: str,
    kind: str,
    baseline: StepFigures | None,
    candidate: StepFigures | None,
    histogram_a: bytes | None,
    histogram_b: bytes | None,
    rule: ComparisonRule,
    seconds_a: list[int] | None = None,
    seconds_b: list[int] | None = None,
) -> StepComparison:
    relative: dict[str, float | None] = {key: None for key in (*_COMPARED_LATENCIES, "rps")}
    change_ms: dict[str, float | None] = {key: None for key in _COMPARED_LATENCIES}
    error_change: float | None = None
    if baseline is not None and candidate is not None:
        for key in _COMPARED_LATENCIES:
            relative[key] = _relative(baseline.latency_ms[key], candidate.latency_ms[key])
            change_ms[key] = round(candidate.latency_ms[key] - baseline.latency_ms[key], 3)
        relative["rps"] = _relative(baseline.rps, candidate.rps)
        error_change = round(candidate.error_percent - baseline.error_percent, 3)
    if histogram_a is None or histogram_b is None:
        which = "baseline" if histogram_a is None else "candidate"
        return StepComparison(
            name,
            kind,
            baseline,
            candidate,
            relative,
            change_ms,
            error_change,
            None,
            "not enough data",
            f"no requests of this step in the {which} run",
        )
    buckets_a, buckets_b = buckets(histogram_a), buckets(histogram_b)
    test = mann_whitney_u(buckets_a, buckets_b)
    verdict, reason = judge(test, relative, change_ms, rule)
    rate_test = None
    if seconds_a is not None and seconds_b is not None:
        rate_test = mann_whitney_u(
            [Bucket(count, count, 1) for count in seconds_a], [Bucket(count, count, 1) for count in seconds_b]
        )
    tails = {key: above_percentile_p_value(buckets_a, buckets_b, float(key[1:])) for key in _REPORTED_PERCENTILES}
    return StepComparison(
        name, kind, baseline, candidate, relative, change_ms, error_change, test, verdict, reason, rate_test, tails
    )


def above_percentile_p_value(baseline: Sequence[Bucket], candidate: Sequence[Bucket], percentile: float) -> float:
    """The p-value of the test that a larger share of ``candidate``'s requests lies above the
    bucket holding ``baseline``'s ``percentile`` than of ``baseline``'s (1.0 where it is not
    larger): whether that percentile rose, asked of the tail alone.

    >>> fast = [Bucket(1000, 1000, 990), Bucket(9000, 9000, 10)]
    >>> slow_tail = [Bucket(1000, 1000, 950), Bucket(9000, 9000, 50)]
    >>> f"{above_percentile_p_value(fast, slow_tail, 99.0):.1e}"
    '1.6e-07'
    >>> above_percentile_p_value(slow_tail, fast, 99.0)
    1.0
    """
    counts_a, counts_b = _counts(baseline), _counts(candidate)
    n_a, n_b = sum(counts_a.values()), sum(counts_b.values())
    if n_a == 0 or n_b == 0:
        return 1.0
    # The bucket holding the percentile, as HDR reads one: the first whose running count
    # reaches that share of the requests.
    wanted = max(1, math.ceil(percentile / 100.0 * n_a))
    running = 0
    threshold = 0
    for key in sorted(counts_a):
        running += counts_a[key]
        if running >= wanted:
            threshold = key
            break
    above_a = sum(count for key, count in counts_a.items() if key > threshold)
    above_b = sum(count for key, count in counts_b.items() if key > threshold)
    if above_b * n_a <= above_a * n_b:
        return 1.0
    return two_proportion_p_value(above_a, n_a, above_b, n_b)


def _requests_per_second(results: RunResults) -> dict[StepId | str, list[int]]:
    """Each step's requests in each full second (0 where it had none), and all request steps'
    under ``ALL_REQUESTS``. The final interval is left out: it is the drain, often a few
    milliseconds, and its count is no second's rate."""
    kinds = results.step_kinds()
    full = [snapshot for snapshot in results.snapshots if not snapshot["final"]]
    counts: dict[StepId | str, list[int]] = {step_id: [0] * len(full) for step_id in kinds}
    counts[ALL_REQUESTS] = [0] * len(full)
    for index, snapshot in enumerate(full):
        for entry in snapshot["steps"]:
            step_id = (entry["scenario"], entry["step"])
            counts[step_id][index] += int(entry["requests"])
            if kinds[step_id] == "request":
                counts[ALL_REQUESTS][index] += int(entry["requests"])
    return counts


# -- regressions a CI job fails on (horde compare --fail-on) --------------------------------------

#: The figures a gate may name: latency (percent of the baseline's), ``errors`` (percentage
#: points of the error share), ``rps`` (percent of the baseline's throughput, lower is worse).
GATE_METRICS: Final = (*_COMPARED_LATENCIES, "errors", "rps")


@dataclass(frozen=True)
class Gate:
    """``--fail-on METRIC[:MARGIN]``: fail when a step's ``metric`` is significantly worse than
    the baseline's by more than ``margin`` (see the module's text, "Gating a build on it").

    >>> Gate.parse("p95:10%"), Gate.parse("errors:0.5"), Gate.parse("rps")
    (Gate(metric='p95', margin=10.0), Gate(metric='errors', margin=0.5), Gate(metric='rps', margin=0.0))
    >>> str(Gate.parse("P99 : 2.5 %")), str(Gate.parse("errors:1"))
    ('p99:2.5%', 'errors:1pt')
    """

    metric: str
    #: Percent of the baseline's figure; for ``errors``, percentage points.
    margin: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Gate:
        """A gate from its flag's text; ``ValueError`` saying what is wrong."""
        metric, _, margin_text = text.partition(":")
        metric = metric.strip().lower()
        if metric not in GATE_METRICS:
            raise ValueError(f"{metric or text!r} is not a figure a gate can watch (give {', '.join(GATE_METRICS)})")
        margin_text = margin_text.strip().lower()
        number = margin_text.removesuffix("%").removesuffix("pt").strip() if margin_text else "0"
        try:
            margin = float(number)
        except ValueError:
            raise ValueError(f"{margin_text!r} is not a margin in percent (as in {metric}:10%)") from None
        if not 0.0 <= margin < math.inf:
            raise ValueError(f"the margin must be 0 or more (got {margin_text})")
        return cls(metric, margin)

    def __str__(self) -> str:
        return f"{self.metric}:{self.margin:g}{'pt' if self.metric == 'errors' else '%'}"


@dataclass(frozen=True)
class Regression:
    """A step that failed a gate: how much worse it got, and the test that says it is real."""

    gate: str
    step: str
    #: How much worse: percent of the baseline's figure, or percentage points for ``errors``.
    worse_by: float
    p_value: float
    sentence: str


def regressions(comparison: RunComparison, gates: Sequence[Gate]) -> list[Regression]:
    """Every (gate, step) pair in which the candidate regressed, in the order of the gates, then
    of the comparison's steps (all requests last)."""
    found = []
    for gate in gates:
        for step in comparison.steps:
            regression = _regression(gate, step, comparison.rule)
            if regression is not None:
                found.append(regression)
    return found


def two_proportion_p_value(hits_a: int, n_a: int, hits_b: int, n_b: int) -> float:
    """Two-sided p-value of the two-proportion z-test: do the shares ``hits / n`` of two runs
    (errors among requests, requests above a percentile) differ?

    Exact enough at a load test's counts (the normal approximation needs a few hits, and a run
    has thousands of requests); 1.0 where nothing can tell them apart (no requests, or every
    request of both runs alike).

    >>> f"{two_proportion_p_value(10, 1000, 40, 1000):.2g}", two_proportion_p_value(0, 1000, 0, 1000)
    ('1.7e-05', 1.0)
    """
    if n_a <= 0 or n_b <= 0:
        return 1.0
    pooled = (hits_a + hits_b) / (n_a + n_b)
    variance = pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b)
    if variance <= 0.0:
        return 1.0
    z = (hits_b / n_b - hits_a / n_a) / math.sqrt(variance)
    return min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def _regression(gate: Gate, step: StepComparison, rule: ComparisonRule) -> Regression | None:
    a, b = step.baseline, step.candidate
    if a is None or b is None or min(a.requests, b.requests) < rule.min_requests:
        return None
    if gate.metric == "errors":
        worse_by = b.error_percent - a.error_percent
        p_value = two_proportion_p_value(a.errors, a.requests, b.errors, b.requests)
        if worse_by <= gate.margin or p_value >= rule.alpha:
            return None
        return Regression(
            str(gate),
            step.name,
            round(worse_by, 3),
            p_value,
            (
                f"{step.name}: errors {a.error_percent:.2f} % → {b.error_percent:.2f} % (+{worse_by:.2f} points, "
                f"more than the {gate.margin:g} allowed); the two-proportion test gives p = {_p_text(p_value)} "
                f"< {rule.alpha:g}"
            ),
        )
    if gate.metric == "rps":
        test = step.rate_test
        change = step.relative_change.get("rps")
        if test is None or change is None or -100.0 * change <= gate.margin:
            return None
        if test.p_value >= rule.alpha or test.probability_of_superiority >= 0.5:
            return None
        return Regression(
            str(gate),
            step.name,
            round(-100.0 * change, 3),
            test.p_value,
            (
                f"{step.name}: {a.rps:,.1f} → {b.rps:,.1f} req/s ({change:+.1%}, more than the {gate.margin:g} % "
                "allowed); "
                f"its seconds are lower by the rank test, p = {test.p_text} < {rule.alpha:g}"
            ),
        )
    test = step.test
    change = step.relative_change.get(gate.metric)
    moved_ms = step.change_ms.get(gate.metric)
    if test is None or change is None or moved_ms is None:
        return None
    if 100.0 * change <= gate.margin or moved_ms <= rule.min_absolute_change_ms:
        return None
    before, after = a.latency_ms[gate.metric], b.latency_ms[gate.metric]
    figures = (
        f"{step.name}: {gate.metric} {before:,.2f} → {after:,.2f} ms "
        f"({change:+.1%}, more than the {gate.margin:g} % allowed)"
    )
    if test.p_value < rule.alpha and test.probability_of_superiority > 0.5:
        return Regression(
            str(gate),
            step.name,
            round(100.0 * change, 3),
            test.p_value,
            f"{figures}; slower by the rank test, p = {test.p_text} < {rule.alpha:g}",
        )
    tail = step.tail_tests.get(gate.metric, 1.0)
    if tail < rule.alpha:
        return Regression(
            str(gate),
            step.name,
            round(100.0 * change, 3),
            tail,
            f"{figures}; more of its requests lie above the baseline's {gate.metric}, "
            f"p = {_p_text(tail)} < {rule.alpha:g}",
        )
    return None


def _p_text(p_value: float) -> str:
    return RankTest(0, 0, 0.0, 0.0, p_value, 0.5).p_text


def _counts(sample: Sequence[Bucket]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for bucket in sample:
        counts[bucket.lowest_us] = counts.get(bucket.lowest_us, 0) + bucket.count
    return counts


def _relative(before: float, after: float) -> float | None:
    return (after - before) / before if before > 0 else None


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def _milliseconds(value: float | None) -> str:
    return "" if value is None else f" ({value:+.3g} ms)"


# -- trends across runs --------------------------------------------------------------------------


@dataclass(frozen=True)
class TrendPoint:
    """One run of a trend: its tag value and each step's p95, rps and errors."""

    run_id: str
    started_at: datetime
    status: str
    tag_value: str
    #: Step name (and ``all requests``) → {"requests", "rps", "p95_ms", "errors", "error_percent"}.
    steps: dict[str, dict[str, float]]


def trend(
    store: Store, tag_key: str, *, tag_value: str | None = None, limit: int = 50, scan: int = 5000
) -> list[TrendPoint]:
    """Runs tagged ``tag_key`` (``=tag_value`` if given), oldest first, at most the ``limit``
    newest of them, among the ``scan`` newest runs of the store.

    Figures come from each run's stored summary (which is ``horde show``'s); a run that ended
    without one (aborted) has it recomputed from its snapshots.
    """
    matching = [
        record
        for record in store.list_runs(limit=scan)
        if tag_key in record.tags and (tag_value is None or record.tags[tag_key] == tag_value)
    ][: max(limit, 0)]
    points: list[TrendPoint] = []
    for record in sorted(matching, key=lambda r: (r.started_at, r.run_id)):
        summary: Mapping[str, Any] | None = record.summary
        if summary is None:
            summary = summarise(store.snapshots(record.run_id), run_id=record.run_id, status=record.status)
        steps = {name: _trend_figures(figures) for name, figures in summary.get("steps", {}).items()}
        steps[ALL_REQUESTS] = _trend_figures(summary)
        points.append(TrendPoint(record.run_id, record.started_at, record.status, record.tags[tag_key], steps))
    return points


def _trend_figures(figures: Mapping[str, Any]) -> dict[str, float]:
    return {
        "requests": figures.get("requests", 0),
        "rps": figures.get("rps", 0.0),
        "p95_ms": figures.get("latency_ms", {}).get("p95", 0.0),
        "errors": figures.get("errors", 0),
        "error_percent": figures.get("error_percent", 0.0),
    }
