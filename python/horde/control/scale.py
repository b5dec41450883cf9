"""Scalability study: the same plan against 1, 2, ... N instances of a target, and how far the
throughput grows with them.

For k instances the plan's target gets ``base_url`` = the first instance and ``instances`` =
the next k - 1 (VUs and arrivals are dealt round-robin over them, as a client-side balancer
would). The plan's load is per instance: a find-max ramp and a plain plan's VU counts, rates and
VU caps are multiplied by k, so each instance sees the same load whatever k is. A plain plan's
throughput is what the instances served; a find-max plan's is its knee.

Scaling efficiency at k is X(k) / (k × X(1)): 1.0 is linear, and what falls short of it is what
the instances share (a database, a lock, a pool). With repeated runs (``--repeats``) X(1) is the
mean of the one-instance runs; the counts are run in turn (1, 2, ... N, then again), so that a
machine that drifts over the study moves every count alike rather than the last ones.

A study read back from the store counts either instances (``horde scale``'s runs, tagged
``instances=K``) or users (runs of one plan at several user counts, tagged ``users=N``): the
same model then answers how many users are served at a per-user rate.

>>> efficiency([(1, 500.0), (2, 990.0), (4, 1600.0)])
[1.0, 0.99, 0.8]
>>> efficiency([(1, 490.0), (1, 510.0), (2, 990.0)])
[0.98, 1.02, 0.99]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from horde.control.capacity import count_interval, instances_from_study
from horde.engine.target import start
from horde.errors import InvalidInput
from horde.plan import ClosedModel, OpenModel, Plan, Scenario
from horde.plan.control import FindMax
from horde.results.scalability import CONFIDENCE, ScalabilityFit, fit_scalability, fit_users
from horde.store import Store

#: The most instances a study may have (each is a run of its own, one after the other).
MAX_INSTANCES = 64
#: The most runs a study makes of each count (``--repeats``).
MAX_REPEATS = 10


def efficiency(throughputs: Sequence[tuple[int, float]]) -> list[float | None]:
    """X(k) / (k × X(1)) for each (k, X(k)), X(1) the mean of the rows with k = 1 (None
    without one)."""
    ones = [x for k, x in throughputs if k == 1]
    base = sum(ones) / len(ones) if ones else None
    return [round(x / (k * base), 3) if base else None for k, x in throughputs]


def plan_for_instances(plan: Plan, urls: Sequence[str], k: int) -> Plan:
    """The plan aimed at the first ``k`` instances, its load multiplied by ``k``."""
    target = plan.target.model_copy(update={"base_url": urls[0], "instances": list(urls[1:k])})
    # A steered plan's VU cap is a ceiling for the whole search, not a per-instance load.
    steered = plan.steer is not None
    update: dict[str, Any] = {
        "target": target,
        "scenarios": [_scaled(scenario, k, cap=not steered) for scenario in plan.scenarios],
    }
    if isinstance(plan.steer, FindMax):
        steer = plan.steer
        # A search sizes its own start; a given start, step and limit are one instance's.
        update["steer"] = steer.model_copy(
            update={
                key: value * k
                for key, value in (("start", steer.start), ("step", steer.step), ("limit", steer.limit))
                if value is not None
            }
        )
    return plan.model_copy(update=update)


def _scaled(scenario: Scenario, k: int, *, cap: bool) -> Scenario:
    workload = scenario.workload
    if isinstance(workload, ClosedModel):
        scaled: ClosedModel | OpenModel = workload.model_copy(
            update={
                "start_vus": workload.start_vus * k,
                "stages": [stage.model_copy(update={"vus": stage.vus * k}) for stage in workload.stages],
            }
        )
    else:
        scaled = workload.model_copy(
            update={
                "start_rate_per_s": workload.start_rate_per_s * k,
                "max_vus": workload.max_vus * (k if cap else 1),
                "stages": [stage.model_copy(update={"rate_per_s": stage.rate_per_s * k}) for stage in workload.stages],
            }
        )
    return scenario.model_copy(update={"workload": scaled})


#: What a study counts: its runs' tag, and the name its rows and its fit give the count.
UNITS = ("instances", "users")


@dataclass
class ScaleRow:
    #: Instances, or users in a users study (the study's ``unit`` says which).
    count: int
    run_id: str
    status: str
    throughput_rps: float
    latency_ms: float | None
    saturation_reason: str | None
    #: The run's figures agree by Little's law (or it could not be judged): a fit uses only these.
    consistent: bool = True


def throughput_of(summary: Mapping[str, Any]) -> tuple[float, float | None, str | None]:
    """(requests/s, latency there, why it stopped) of one run of the study: find-max's knee or
    the rate that held the target response time when the run was steered, otherwise the run's
    own successful responses per second and p95. A target response time not held gives the
    highest level read under T and its outcome (``kept_crossing``...), never the run's mixed
    throughput."""
    capacity = summary.get("capacity")
    if capacity and capacity.get("method") == "target_response_time":
        outcome = None if capacity.get("outcome") == "held" else capacity.get("outcome")
        if capacity.get("max_rps") is not None:
            return float(capacity["max_rps"]), capacity.get("latency_ms_at_max"), outcome
        under = capacity.get("highest_under_target") or {}
        return float(under.get("ok_rps") or 0.0), under.get("latency_ms"), outcome
    if capacity and capacity.get("max_rps") is not None:
        return float(capacity["max_rps"]), capacity.get("latency_ms_at_max"), capacity.get("saturation_reason")
    ok = summary["requests"] - summary["errors"]
    return ok / summary["duration_s"] if summary["duration_s"] else 0.0, summary["latency_ms"]["p95"], None


def study_block(rows: Sequence[ScaleRow], unit: str = "instances") -> dict[str, Any]:
    """The study's rows, each keyed by its ``unit`` (``instances`` or ``users``) and its
    throughput per one of them (``per_instance_rps``, ``per_user_rps``)."""
    ratios = efficiency([(row.count, row.throughput_rps) for row in rows])
    return {
        "unit": unit,
        "rows": [
            {
                unit: row.count,
                "run_id": row.run_id,
                "status": row.status,
                "throughput_rps": round(row.throughput_rps, 3),
                per_one(unit): round(row.throughput_rps / row.count, 3),
                "latency_ms": row.latency_ms,
                "saturation_reason": row.saturation_reason,
                "efficiency": ratio,
                "consistent": row.consistent,
            }
            for row, ratio in zip(rows, ratios)
        ],
    }


def per_one(unit: str) -> str:
    """The row's key for the throughput per instance or per user."""
    return f"per_{unit[:-1]}_rps"


@contextmanager
def builtin_instances(
    count: int, *, workers: int | None, service_ms: float | None, shared: tuple[float, float] | None = None
) -> Iterator[list[str]]:
    """``count`` built-in targets on free loopback ports, stopped on the way out. ``shared``
    (serial ms, crosstalk ms): they share one resource at those costs, so that the study has a
    known answer (``horde.engine.target.shared_law``)."""

    if not 1 <= count <= MAX_INSTANCES:
        raise InvalidInput(f"--instances must be between 1 and {MAX_INSTANCES} (got {count})")
    handles = []
    try:
        for _ in range(count):
            handles.append(start(port=0, workers=workers, service_ms=service_ms, shared=shared))
        yield [f"http://127.0.0.1:{handle.port}" for handle in handles]
    finally:
        for handle in handles:
            handle.stop()


def run_study(
    plan: Plan,
    urls: Sequence[str],
    run_one: Callable[[Plan, int], tuple[str, str, Mapping[str, Any]]],
    *,
    repeats: int = 1,
) -> dict[str, Any]:
    """Runs the plan against 1..len(urls) instances, ``repeats`` runs each, the counts in turn
    (``run_one(plan, k)`` returns the run's id, status and summary), and reports throughput and
    efficiency per run, its rows by count. An interrupted run ends the study there."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(
            f"--repeats must be between 1 and {MAX_REPEATS} (got {repeats})",
            hint="3 runs of each count let the model tell noise from misfit and reach further",
        )
    rows = []
    for k in [k for _ in range(repeats) for k in range(1, len(urls) + 1)]:
        run_id, status, summary = run_one(plan_for_instances(plan, urls, k), k)
        throughput, latency, reason = throughput_of(summary)
        rows.append(ScaleRow(k, run_id, status, throughput, latency, reason, consistent(summary)))
        if status == "interrupted":
            break
    return study_block(sorted(rows, key=lambda row: row.count))


def consistent(summary: Mapping[str, Any]) -> bool:
    """Whether a run's figures may be modelled: not found inconsistent by Little's law (a run
    without the check, or one it could not judge, counts as consistent)."""
    check = summary.get("littles_law")
    return not isinstance(check, dict) or check.get("consistent") is not False


def forecast_block(
    study: dict[str, Any], *, peak_rps: float | None, headroom_percent: float, per_user_rate: float | None = None
) -> dict[str, Any]:
    """The scalability model fitted to the study's rows (only the consistent runs that finished
    with a throughput), and from it the instances for ``peak_rps`` (an instances study) or the
    users supported at ``per_user_rate`` each (a users study)."""
    unit = study.get("unit", "instances")
    used = [
        row
        for row in study["rows"]
        if row.get("consistent", True) and row["status"] not in UNFINISHED and row["throughput_rps"] > 0
    ]
    points = [(row[unit], row["throughput_rps"]) for row in used]
    fit = fit_users(points) if unit == "users" else fit_scalability(points)
    block = fit.to_dict()
    block["left_out"] = [
        {
            unit: row[unit],
            "throughput_rps": row["throughput_rps"],
            "run_id": row["run_id"],
            "why": _why_left_out(row),
        }
        for row in study["rows"]
        if row not in used
    ]
    if peak_rps is not None:
        block["peak"] = instances_from_study(fit, peak_rps, headroom_percent)
    if per_user_rate is not None:
        block["users"] = users_from_study(fit, per_user_rate)
    return block


def users_from_study(fit: ScalabilityFit, per_user_rate: float) -> dict[str, Any]:
    """The users a users study's model serves at ``per_user_rate`` requests/s each: the count,
    its interval, and the answer as a sentence (or the model's refusal in its place)."""
    answer = fit.users_supported(per_user_rate)
    block: dict[str, Any] = {
        "per_user_rate": per_user_rate,
        "users_supported": answer.count,
        "users_low": answer.low,
        "users_high": answer.high,
        # The most users the model forecasts: where an interval's far end stops.
        "users_limit": math.floor(fit.forecast_limit + 1e-9),
        "confidence": CONFIDENCE,
        "refusal": answer.refusal,
        # A lower bound: served where the model's reach ends (why it reaches no further).
        "users_at_least": answer.at_least,
        "reach": answer.why,
    }
    block["answer"] = users_sentence(block)
    return block


def users_sentence(block: dict[str, Any]) -> str:
    """The answer of :func:`users_from_study` in one sentence, as the console, the report and
    the dashboard print it.

    >>> users_sentence({"users_supported": 180, "users_low": 160, "users_high": 205, "confidence": 0.9,
    ...                 "per_user_rate": 2.5, "users_limit": 64, "refusal": None})
    '180 users supported (160–205 at 90 %) at 2.5 req/s each'
    >>> users_sentence({"users_supported": 16, "users_at_least": True, "per_user_rate": 12.5, "refusal": None,
    ...                 "reach": "past 16 users the 90 % interval of the forecast is wider than 80 % of it"})
    'at least 16 users supported at 12.5 req/s each; past 16 users the 90 % interval of the forecast is wider than 80 % of it'
    >>> users_sentence({"per_user_rate": 2.5, "refusal": "even 1 user gets less than 2.5/s from the fitted curve"})
    'no user count is served 2.5 req/s each: even 1 user gets less than 2.5/s from the fitted curve'
    """
    rate = f"{block['per_user_rate']:,.4g} req/s each"
    if block.get("refusal"):
        return f"no user count is served {rate}: {block['refusal']}"
    count = block["users_supported"]
    if block.get("users_at_least"):
        return f"at least {count:,} users supported at {rate}; {block['reach']}"
    spread = count_interval(
        block.get("users_low"), block.get("users_high"), block.get("users_limit", count), block.get("confidence", 0.9)
    )
    return f"{count:,} users supported{spread} at {rate}"


#: Statuses of a run whose throughput is not the count's (it did not run to its end), and why.
UNFINISHED = {"interrupted": "the run was interrupted", "failed": "the run failed", "aborted": "the run was aborted"}


def _why_left_out(row: dict[str, Any]) -> str:
    if not row.get("consistent", True):
        return "inconsistent by Little's law"
    if row["status"] in UNFINISHED:
        return UNFINISHED[row["status"]]
    return "no throughput"


#: How many of the store's latest runs a stored study is looked for in.
STUDY_SEARCH_LIMIT = 10_000


def stored_study(store: Store, study_id: str) -> dict[str, Any]:
    """A study read back from its runs in the store (tagged ``scale_study`` = ``study_id``), as
    :func:`run_study` reported it, without sending load. Its runs are tagged ``instances=K``
    (``horde scale``'s) or ``users=N`` (one plan at several user counts), all the one or all
    the other."""
    records = [
        record
        for record in store.list_runs(limit=STUDY_SEARCH_LIMIT)
        if record.tags.get("scale_study") == study_id and record.summary is not None
    ]
    if not records:
        raise InvalidInput(
            f"no stored run belongs to the scalability study {study_id!r}",
            hint="`horde scale` prints its study id and tags each run scale_study=ID; `horde runs` lists runs",
        )
    unit = _study_unit(study_id, records)
    rows = []
    for record in records:
        count = record.tags[unit]
        if not count.isdigit() or int(count) < 1:
            raise InvalidInput(
                f"run {record.run_id} of study {study_id}: its tag {unit}={count!r} is no {unit[:-1]} count",
                hint=f"each run of a study is tagged {unit}=N, N a whole number from 1",
            )
        summary = record.summary or {}
        throughput, latency, reason = throughput_of(summary)
        rows.append(
            ScaleRow(int(count), record.run_id, record.status, throughput, latency, reason, consistent(summary))
        )
    rows.sort(key=lambda row: (row.count, row.run_id))
    return {"study_id": study_id, **study_block(rows, unit)}


def _study_unit(study_id: str, records: Sequence[Any]) -> str:
    """What the study's runs count, from their tags: one unit for every run, or a located refusal."""
    by_unit: dict[str, list[str]] = {unit: [] for unit in UNITS}
    for record in records:
        tagged = [unit for unit in UNITS if unit in record.tags]
        if len(tagged) != 1:
            raise InvalidInput(
                f"run {record.run_id} of study {study_id} is tagged "
                + (
                    " and ".join(f"{unit}={record.tags[unit]!r}" for unit in tagged)
                    or "with neither instances nor users"
                ),
                hint="each run of a study is tagged either instances=K (horde scale's runs) or users=N "
                f"(e.g. horde run plan.yaml --vus N --tag scale_study={study_id} --tag users=N)",
            )
        by_unit[tagged[0]].append(record.run_id)
    if all(by_unit.values()):
        raise InvalidInput(
            f"study {study_id} mixes instance counts (runs {', '.join(sorted(by_unit['instances']))}) "
            f"and user counts (runs {', '.join(sorted(by_unit['users']))}): one model cannot fit both",
            hint="a study measures one of the two: run the users runs again under a study id of their own "
            "(--tag scale_study=ANOTHER_ID); `horde runs` lists the runs with their tags",
        )
    return "users" if by_unit["users"] else "instances"
