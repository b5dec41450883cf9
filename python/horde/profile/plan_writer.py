"""The plan a production profile writes (``horde profile --plan FILE``).

One scenario, ``production``: a weighted ``choice`` of the endpoints kept, each with its method
and path template, the weights being the endpoints' requests in the peak window (so the mix
Horde sends is the peak's mix among them; against a target as fast as production, the mix by
time follows).
The endpoints kept are the largest by ``--by`` (count, or time: count × response time) until
they cover ``--cover`` percent of it, and every other one at or above ``--min-share`` percent
of the requests *or* of the server's time: an endpoint rare but slow is kept whatever ``--by``
says. What is left out is told, with its shares of both, in the plan's comments and the
summary. Ids come from the values the log showed (a sample drawn uniformly over the requests,
so frequent ids stay frequent), inline or in a feeder file written beside the plan (chosen
for the user when inline ids would take the plan past Horde's plan size limit); values that
must not leave the log (secret query fields, e-mail addresses, tokens) never do: a secret query
field becomes a plan parameter (``-p token=...``), an address or a token a generated value.

The workload carries each kept endpoint's own intensity in the peak window (the log's busiest
minute, the part of its busiest hour it covers, or a chosen ``--window``): its requests in that
window over the window's seconds, times a headroom; a nightly batch busy only at the peak
weighs what it weighs there, not its share of the day. Which endpoints are kept is still
decided over the whole log (:func:`choose_endpoints`). As an open model (arrivals at that rate,
one request each) or as users
(VUs looping request, think time). Sizing is Little's law with the mean: VUs = rate × (mean
response time + think time), its inputs stated in the plan's comments. Then a sighting shot
(``horde sight PLAN``) and find-max's stepped ramp in steps that reach the rate in
:data:`~horde.control.sight.SUGGESTED_STEPS` (``--find-max`` writes it into the plan's
``steer``). The plan is checked on both sides (pydantic and the engine) before it is kept:
written to a temporary file beside it, checked, then renamed, so that a plan that fails its
check is never left on disk.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from datetime import datetime, timezone
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from ruamel.yaml import YAML

from horde.control.sight import SUGGESTED_STEP_DURATION_S, SUGGESTED_STEPS, nice_number
from horde.engine.written_plan import write_checked_plan
from horde.errors import InvalidInput
from horde.plan import MAX_THINK_TIME_MS, METHODS
from horde.plan.bounds import MAX_PLAN_BYTES
from horde.plan.engine_rules import is_to_supply
from horde.profile import supply
from horde.profile.endpoints import Slot
from horde.profile.kinds import MAX_KINDS, MIN_SILHOUETTE, Kinds
from horde.profile.profile import OTHER, EndpointStats, Profile, Window

MODELS: Final = ("open", "users")
IDS: Final = ("seen", "feeder")
#: The share (percent) of the requests or of the server's time at or above which an endpoint is
#: kept whatever --cover and --by say (--min-share).
MIN_SHARE_PERCENT = 1.0
#: Left-out endpoints named one by one in the plan's comments (the rest are added up).
LEFT_OUT_NAMED = 10
#: Seen values written inline per slot (a random choice among them; repeats keep the frequencies).
INLINE_VALUES = 50
#: What a parameter standing for a secret query field defaults to: the plan runs, the real
#: value comes with ``-p NAME=VALUE`` or ``HORDE_PARAM_NAME``.
SECRET_DEFAULT: Final = "redacted"
_SAFE_VALUE = re.compile(r"[\w.~%+:,@!$()*;=-]{1,64}")
_PATH_SAFE: Final = "/:@!$&'()*+,;=-._~%"


@dataclass(frozen=True)
class PlanOptions:
    """What the written plan asks for (``horde profile --plan`` flags)."""

    base_url: str = "http://127.0.0.1:8080"
    cover_percent: float = 90.0
    by: str = "count"
    min_share_percent: float = MIN_SHARE_PERCENT
    headroom_percent: float = 20.0
    model: str = "open"
    duration_s: float = 300.0
    ramp_up_s: float = 60.0
    ids: str = "seen"
    peak: str = "minute"
    #: A chosen window in place of the peak: (start, Unix seconds; length, seconds).
    window: tuple[float, float] | None = None
    find_max: bool = False

    def check_choices(self) -> None:
        """InvalidInput for a choice that is none of its flag's: told before any log is read."""
        if self.by not in ("count", "time"):
            raise InvalidInput(
                f"--by: {self.by!r} is neither count nor time", hint="--by count (the default) or --by time"
            )
        if self.model not in MODELS:
            raise InvalidInput(
                f"--model: {self.model!r} is not a workload", hint="--model open (arrivals) or --model users (VUs)"
            )
        if self.ids not in IDS:
            raise InvalidInput(
                f"--ids: {self.ids!r} is neither seen nor feeder",
                hint="--ids seen (inline) or --ids feeder (a CSV file)",
            )
        if not 0.0 <= self.min_share_percent <= 100.0:
            raise InvalidInput(
                f"--min-share must be between 0 and 100 (got {self.min_share_percent:g})",
                hint="e.g. --min-share 1 (every endpoint at 1 % of the requests or of the time; 0: none)",
            )
        if self.peak not in ("minute", "hour"):
            raise InvalidInput(
                f"--peak: {self.peak!r} is neither minute nor hour", hint="--peak minute (the default) or --peak hour"
            )

    def check(self, profile: Profile) -> None:
        """InvalidInput for a choice the profile cannot honour."""
        self.check_choices()
        if self.by == "time" and not profile.timed:
            raise InvalidInput(
                "--by time needs response times, and this log has none",
                hint="log $request_time (nginx) or %D (Apache), or use --by count",
            )
        if self.window is not None and not profile.window_per_s(*self.window)[1]:
            span = profile.to_dict()["source"]
            raise InvalidInput(
                f"--window: {_iso_minute(self.window[0])} for {self.window[1]:g} s holds no whole minute of the log",
                hint=f"the log runs from {span['first_minute']} to {span['last_minute']}",
            )
        if self.model == "users" and profile.per_user_rate() is None:
            raise InvalidInput(
                "--model users needs think times, and no session of this log had a second request",
                hint="key sessions with --session cookie:NAME, or use --model open",
            )


@dataclass
class WrittenPlan:
    """What was written: the plan, its feeder files, the endpoints chosen, what was left out
    and the sizing. ``covered_share`` is the chosen endpoints' share of the requests,
    ``covered_time_share`` of the server's time."""

    path: Path
    feeders: list[Path]
    endpoints: list[dict[str, Any]]
    covered_share: float
    sizing: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    covered_time_share: float | None = None
    left_out: list[dict[str, Any]] = field(default_factory=list)
    #: What the plan leaves to its user (:func:`horde.profile.supply.parts`).
    to_supply: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "feeders": [str(path) for path in self.feeders],
            "covered_share": round(self.covered_share, 6),
            "covered_time_share": round(self.covered_time_share, 6) if self.covered_time_share is not None else None,
            "endpoints": self.endpoints,
            "left_out": self.left_out,
            "sizing": self.sizing,
            "notes": self.notes,
            "to_supply": self.to_supply,
        }


@dataclass(frozen=True)
class Coverage:
    """The endpoints a plan keeps and what it leaves out (:func:`choose_endpoints`)."""

    chosen: list[EndpointStats]
    #: The chosen endpoints' shares of the log's requests and of its server time, together.
    by_count: float
    by_time: float
    #: The endpoints left out, the largest first by the larger of their two shares.
    left_out: list[EndpointStats]
    notes: list[str]


def choose_endpoints(
    profile: Profile, by: str, cover_percent: float, min_share_percent: float = MIN_SHARE_PERCENT
) -> Coverage:
    """The endpoints a plan keeps: the largest by ``by`` until they cover ``cover_percent`` of
    the traffic by ``by``, and then every other endpoint at or above ``min_share_percent`` of
    the requests *or* of the server's time, whatever ``by`` (a rare but slow endpoint is what
    a capacity test must not drop: a refund at 5 % of the requests can be half the server's
    time). Endpoints whose method Horde does not send are left out with a note."""
    notes: list[str] = []
    ranked = sorted(profile.endpoints, key=lambda stats: (-profile.share(stats, by), -stats.count, stats.name))
    floor = min_share_percent / 100.0
    chosen: list[EndpointStats] = []
    left_out: list[EndpointStats] = []
    covered = 0.0
    for stats in ranked:
        significant = floor > 0 and (
            profile.share(stats, "count") >= floor or (profile.timed and profile.share(stats, "time") >= floor)
        )
        if covered * 100.0 >= cover_percent and not significant:
            left_out.append(stats)
            continue
        if stats.shape.method not in METHODS:
            notes.append(f"{stats.name}: {stats.shape.method} is not a method Horde sends (left out)")
            left_out.append(stats)
            continue
        chosen.append(stats)
        covered += profile.share(stats, by)
    if not chosen:
        raise InvalidInput("no endpoint of the log has a method Horde sends", hint=f"Horde sends {', '.join(METHODS)}")
    if profile.other is not None:
        left_out.append(profile.other)
    left_out.sort(key=lambda stats: (-max(profile.share(stats, "count"), profile.share(stats, "time")), stats.name))
    return Coverage(
        chosen,
        sum(profile.share(stats, "count") for stats in chosen),
        sum(profile.share(stats, "time") for stats in chosen) if profile.timed else 0.0,
        left_out,
        notes,
    )


@dataclass(frozen=True)
class Intensity:
    """Where the plan's rates come from (:func:`measure_intensity`): a window of the log's
    minutes, its requests, and each kept endpoint's requests in it."""

    window: Window
    #: What the window is: "minute" or "hour" (the peak's), or "window" (--window).
    peak: str
    requests: int
    #: Endpoint name -> its requests in the window, for every kept endpoint (0: not seen there).
    counts: dict[str, int]

    @property
    def kept(self) -> int:
        return sum(self.counts.values())

    @property
    def kept_share(self) -> float:
        """The kept endpoints' share of the window's requests."""
        return self.kept / self.requests if self.requests else 0.0

    def unseen(self, chosen: Sequence[EndpointStats]) -> list[EndpointStats]:
        return [stats for stats in chosen if not self.counts[stats.name]]

    def describe(self) -> str:
        """The window in words: "the peak hour (2024-03-01T11:00:00Z, 60 minutes)"."""
        what = "the chosen window" if self.peak == "window" else f"the peak {self.peak}"
        minutes = f", {self.window.minutes} minutes" if self.window.minutes != 1 else ""
        return f"{what} ({_iso_minute(self.window.first * 60)}{minutes})"


def measure_intensity(profile: Profile, options: PlanOptions, coverage: Coverage) -> Intensity:
    """Each kept endpoint's requests in the window the plan's rates come from: --window's whole
    minutes in the log, else the peak minute or the part of the peak hour the log covers.
    InvalidInput when no kept endpoint has a request there (a plan of nothing to send)."""
    if options.window is not None:
        window, peak = profile.chosen_window(*options.window), "window"
    else:
        window, peak = profile.peak_window(options.peak), options.peak
    intensity = Intensity(
        window,
        peak,
        profile.requests_in(window),
        {stats.name: profile.requests_in(window, stats) for stats in coverage.chosen},
    )
    if not intensity.kept:
        raise InvalidInput(
            f"none of the {len(coverage.chosen)} endpoints kept has a request in {intensity.describe()}: "
            "the plan would send nothing",
            hint="--peak hour, or a --window START/LENGTH where they run",
        )
    return intensity


def write_plan(profile: Profile, path: Path, options: PlanOptions, kinds: Kinds | None = None) -> WrittenPlan:
    """Writes the plan (and its feeder files) to ``path``; checks it on both sides first. Ids
    inline that would take the plan past Horde's plan size limit go to feeder files instead.
    With ``kinds`` of more than one client kind (:func:`horde.profile.kinds.find_kinds`), one
    scenario per kind."""
    options.check(profile)
    coverage = choose_endpoints(profile, options.by, options.cover_percent, options.min_share_percent)
    intensity = measure_intensity(profile, options, coverage)
    written = _write(profile, path, options, coverage, kinds, intensity)
    if written is None and options.ids == "seen":
        written = _write(profile, path, replace(options, ids="feeder"), coverage, kinds, intensity)
        if written is not None:
            written.notes.append(
                f"inline ids would take the plan past {MAX_PLAN_BYTES // 1024} KiB: they are in feeder files"
            )
    if written is None:
        raise InvalidInput(
            f"the plan for {len(coverage.chosen)} endpoints would be over Horde's plan size limit ({MAX_PLAN_BYTES // 1024} KiB)",
            hint="keep fewer endpoints (a lower --cover, a higher --min-share), ids in feeder files (--ids feeder), "
            "or fewer distinct endpoints (--template for paths with free text in them)",
        )
    return written


def _write(
    profile: Profile, path: Path, options: PlanOptions, coverage: Coverage, kinds: Kinds | None, intensity: Intensity
) -> WrittenPlan | None:
    """The plan written and checked, or None when its text would be over the plan size limit.

    A kept endpoint with no request in the window gets no branch: its rate there is 0, and the
    plan reproduces the window (a branch, whose weight Horde needs above 0, would send load the
    window did not have). It is named in the comments and notes with its shares of the whole
    log, so that the engineer sees it and can measure it in a window where it runs."""
    chosen = coverage.chosen
    sent = [stats for stats in chosen if intensity.counts[stats.name]]
    feeder_dir = path.parent / f"{path.stem}.feeders"
    feeders: dict[str, list[list[str]]] = {}
    parameters: dict[str, str] = {}
    total = intensity.kept
    branches = []
    rows = []
    for stats in chosen:
        in_window = intensity.counts[stats.name]
        weight = max(0.0001, round(100.0 * in_window / total, 4)) if in_window else 0.0
        rows.append(
            {
                "endpoint": stats.name,
                "weight": weight,
                "requests_in_window": in_window,
                "share_by_count": round(profile.share(stats, "count"), 6),
                "share_by_time": round(profile.share(stats, "time"), 6) if profile.timed else None,
            }
        )
        if not in_window:
            continue
        step_path = _path_template(stats, options.ids, feeders, parameters)
        step: dict[str, Any] = {"name": stats.name, "method": stats.shape.method, "path": step_path}
        supply.mark(step, stats)  # what the log cannot hold, marked as the user's to give
        branches.append({"weight": weight, "steps": [step]})
    sizing = _sizing(profile, options, path, coverage, intensity)
    steps: list[dict[str, Any]] = [{"type": "choice", "branches": branches}]
    if options.model == "users" and sizing["little"]["think_ms"] > 0:  # clients that never pause: no think step
        steps.append({"type": "think", "think_time": {"type": "exponential", "mean_ms": sizing["little"]["think_ms"]}})
    scenario: dict[str, Any] = {"name": "production", "steps": steps, "workload": _workload(options, sizing)}
    feeder_list = [
        {"name": name, "path": f"{feeder_dir.name}/{name}.csv", "format": "csv", "mode": "random"} for name in feeders
    ]
    if feeders:
        scenario["feeders"] = feeder_list
    scenarios = [scenario]
    if kinds is not None:
        sizing["kinds_found"] = {
            "kinds": len(kinds.kinds),
            "silhouette": round(kinds.silhouette, 3) if kinds.silhouette is not None else None,
            "sessions": kinds.sessions,
            "paced_sessions": kinds.paced_sessions,
            "method": f"k-means on the sessions' endpoint mix and pace, k = 2 to {MAX_KINDS} by the "
            f"mean silhouette, a split kept at {MIN_SILHOUETTE:g} or more",
        }
    if kinds is not None and len(kinds.kinds) > 1:
        scenarios = _kind_scenarios(profile, options, coverage, kinds, branches, sizing, feeder_list)
    data: dict[str, Any] = {"version": 1, "name": "production-profile"}
    if parameters:
        data["parameters"] = parameters
    data["target"] = {"base_url": options.base_url}
    pool = _pool(scenarios, sizing)
    if pool is not None:
        data["target"]["connections"] = {"pool": pool}
    data["scenarios"] = scenarios
    if options.find_max:
        data["steer"] = {
            "type": "find_max",
            **{key: sizing["find_max"][key] for key in ("start", "step", "step_duration_s")},
        }
    left_out = [_left_out_row(profile, stats) for stats in coverage.left_out]
    text = _header(profile, options, coverage, left_out, sizing, parameters, intensity) + _yaml(data)
    if len(text.encode("utf-8")) > MAX_PLAN_BYTES:
        return None
    written = write_checked_plan(
        path,
        text,
        {feeder_dir / f"{name}.csv": _csv(table) for name, table in feeders.items()},
        flag="--plan",
        accept=lambda problem: is_to_supply(problem.message),
    )
    notes = list(coverage.notes) + supply.notes(sent)
    unseen = intensity.unseen(chosen)
    if unseen:
        notes.append(
            f"{len(unseen)} endpoint{'' if len(unseen) == 1 else 's'} kept for the whole log had no request in "
            f"{intensity.describe()}: rate 0, no branch ({', '.join(stats.name for stats in unseen)})"
        )
    return WrittenPlan(
        path,
        written,
        rows,
        coverage.by_count,
        sizing,
        notes,
        coverage.by_time if profile.timed else None,
        left_out,
        supply.parts(sent, parameters),
    )


def _left_out_row(profile: Profile, stats: EndpointStats) -> dict[str, Any]:
    return {
        "endpoint": OTHER if stats is profile.other else stats.name,
        "requests": stats.count,
        "share_by_count": round(profile.share(stats, "count"), 6),
        "share_by_time": round(profile.share(stats, "time"), 6) if profile.timed else None,
    }


def _path_template(
    stats: EndpointStats, ids: str, feeders: dict[str, list[list[str]]], parameters: dict[str, str]
) -> str:
    """The step's path: the endpoint's literal parts, each slot as a template drawing its values."""
    shape = stats.shape
    kept = [i for i, _ in enumerate(shape.slots) if any(sample[i] is not None for sample in stats.samples)]
    feeder_name = f"endpoint_{stats.index}"
    columns: dict[int, str] = {}
    if ids == "feeder" and kept:
        rows = [
            [str(sample[i]) for i in kept]
            for sample in stats.samples
            if all(sample[i] is not None and _SAFE_VALUE.fullmatch(str(sample[i])) for i in kept)
        ]
        if rows:
            names = _column_names([shape.slots[i] for i in kept])
            columns = dict(zip(kept, names))
            feeders[feeder_name] = [names, *rows]

    def value(index: int) -> str:
        slot = shape.slots[index]
        if index in columns:
            return "{{ " + f"{feeder_name}.{columns[index]}" + " }}"
        seen = [
            str(sample[index])
            for sample in stats.samples
            if sample[index] is not None and _SAFE_VALUE.fullmatch(str(sample[index]))
        ][:INLINE_VALUES]
        if seen and "secret" not in stats.slot_kinds(index):
            distinct = list(dict.fromkeys(seen))
            if len(distinct) == 1:
                return distinct[0]
            return "{{ random_choice(" + json.dumps(seen, separators=(",", ":")) + ") }}"
        return _generated(slot, stats.slot_kinds(index), parameters)

    path = "".join(quote(piece, safe=_PATH_SAFE) if isinstance(piece, str) else value(piece) for piece in shape.pieces)
    query_slots = [i for i, slot in enumerate(shape.slots) if slot.where == "query"]
    if query_slots:
        path += "?" + "&".join(f"{quote(shape.slots[i].label, safe='[]_.-')}={value(i)}" for i in query_slots)
    return path


def _generated(slot: Slot, kinds: set[str], parameters: dict[str, str]) -> str:
    """A value for a slot whose values the log may not give: a parameter for a secret query
    field, else one made up in the kind of the slot's values (of ``kinds``, those seen across
    the endpoint's shapes, the one a number would not fit: a uuid for a hex id)."""
    if "secret" in kinds and slot.where == "query":
        name = re.sub(r"\W", "_", slot.label).strip("_").lower() or "secret"
        name = name if name[0].isalpha() else f"p_{name}"
        parameters.setdefault(name, SECRET_DEFAULT)
        return "{{ params." + name + " }}"
    if "email" in kinds:
        return "user{{ random_int(1, 100000) }}@example.com"
    if kinds & {"token", "uuid", "hex", "secret"}:
        return "{{ uuid() }}"
    return "{{ random_int(1, 1000) }}"


def _column_names(slots: Sequence[Slot]) -> list[str]:
    names: list[str] = []
    for slot in slots:
        base = re.sub(r"\W", "_", slot.label).strip("_").lower() or "value"
        base = base if base[0].isalpha() else f"v_{base}"
        name, number = base, 2
        while name in names:
            name, number = f"{base}_{number}", number + 1
        names.append(name)
    return names


def _csv(table: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(table)
    return out.getvalue()


def _sizing(
    profile: Profile, options: PlanOptions, path: Path, coverage: Coverage, intensity: Intensity
) -> dict[str, Any]:
    """The rate to plan for and the VUs it needs by Little's law.

    Each endpoint's intensity is its own requests in the window over the window's seconds (the
    payments team's definition: an endpoint busy only at the peak weighs what it weighs there);
    the plan sends the kept endpoints' together, the window's rate × their share *of the
    window*, plus the headroom. The VUs busy at once are that rate times the time each spends
    per request (Little's law, L = λ × W): the *mean* response time of the mix the plan sends
    (each kept endpoint's mean, weighted by its requests in the window; the median understates
    it: a tail of slow requests holds VUs as long as it lasts), plus the think time for users
    looping request and think (a closed model). Response and think times are the whole log's:
    a window of a minute holds too few of them to measure."""
    window = intensity.window
    peak = profile.rate_in(window)
    factor = 1.0 + options.headroom_percent / 100.0
    rate = round(intensity.kept / window.seconds * factor, 3)
    timed = [
        (intensity.counts[stats.name], stats.timing)
        for stats in coverage.chosen
        if stats.timing.count and intensity.counts[stats.name]
    ]
    mean_ms = sum(count * timing.mean() for count, timing in timed) / sum(count for count, _ in timed) if timed else 0.0
    think_ms = (
        min(profile.sessions.think_ms.mean(), MAX_THINK_TIME_MS)
        if options.model == "users" and profile.sessions.think_ms.count
        else 0.0
    )
    cycle_ms = mean_ms + think_ms
    vus = max(1, math.ceil(round(rate * cycle_ms / 1000.0, 6)))
    sizing: dict[str, Any] = {
        "peak": intensity.peak,
        "peak_per_s": round(peak, 3),
        # The minutes the rates were measured over: 1, the part of the peak hour the log covers,
        # or the window's whole minutes in the log; from this minute on.
        "peak_minutes": window.minutes,
        "peak_from": _iso_minute(window.first * 60),
        "window": {"start": _iso_minute(options.window[0]), "length_s": options.window[1]}
        if options.window is not None
        else None,
        # The window's requests and the kept endpoints' among them (the rate's share).
        "window_requests": intensity.requests,
        "kept_in_window": intensity.kept,
        "kept_share_in_window": round(intensity.kept_share, 6),
        "headroom_percent": options.headroom_percent,
        "rate_per_s": rate,
        "mean_ms": round(mean_ms, 3) if timed else None,
        "p95_ms": round(profile.overall.percentile(95), 3) if profile.timed else None,
        # Little's law's inputs and answer: VUs = rate × (mean response time + think time).
        "little": {
            "rate_per_s": rate,
            "mean_ms": round(mean_ms, 3),
            "think_ms": round(think_ms, 3),
            "vus": vus if timed or think_ms else None,
        },
        # What one VU sends a second: 1000 / (mean + think).
        "per_vu_rps": round(1000.0 / cycle_ms, 6) if cycle_ms > 0 else None,
        # Each kept endpoint's requests in the window and its rate: those requests over the
        # window's seconds × the headroom (0: not seen in the window, no branch).
        "endpoints": [
            {
                "endpoint": stats.name,
                "requests_in_window": intensity.counts[stats.name],
                "rate_per_s": round(intensity.counts[stats.name] / window.seconds * factor, 6),
                "mean_ms": round(stats.timing.mean(), 3) if stats.timing.count else None,
            }
            for stats in coverage.chosen
        ],
    }
    if options.model == "users":
        sizing["users"] = vus
        step: float = max(1.0, float(math.ceil(vus / SUGGESTED_STEPS)))
        unit = "VUs"
    else:
        step = nice_number(rate / SUGGESTED_STEPS)
        unit = "arrivals/s"
    sizing["find_max"] = {
        "unit": unit,
        "start": step,
        "step": step,
        "step_duration_s": SUGGESTED_STEP_DURATION_S,
        "up_to": sizing.get("users", rate),
    }
    sizing["sight_command"] = f"horde sight {path}"
    sizing["find_max_command"] = (
        f"horde run {path} --find-max --start {step:g} --step {step:g} --step-duration {SUGGESTED_STEP_DURATION_S}s"
    )
    return sizing


def _workload(options: PlanOptions, sizing: dict[str, Any]) -> dict[str, Any]:
    ramp = min(options.ramp_up_s, options.duration_s)
    hold = options.duration_s - ramp
    if options.model == "users":
        users = sizing["users"]
        stages = ([{"duration_s": ramp, "vus": users}] if ramp > 0 else []) + (
            [{"duration_s": hold, "vus": users}] if hold > 0 else []
        )
        return {"type": "closed", "start_vus": 0 if ramp > 0 else users, "stages": stages}
    rate = sizing["rate_per_s"]
    # Little's law with room: the VUs busy at once are rate × latency; allow 2 s each (or 4 × the
    # log's p95), so that a slower test target shows as latency before arrivals are dropped.
    p95_s = (sizing["p95_ms"] or 0.0) / 1000.0
    max_vus = max(10, math.ceil(rate * max(2.0, 4.0 * p95_s)))
    stages = ([{"duration_s": ramp, "rate_per_s": rate}] if ramp > 0 else []) + (
        [{"duration_s": hold, "rate_per_s": rate}] if hold > 0 else []
    )
    return {"type": "open", "start_rate_per_s": 0 if ramp > 0 else rate, "max_vus": max_vus, "stages": stages}


#: VUs beyond which the plan's VUs share a pool of connections rather than one each (a
#: connection per VU is an open file per VU: tens of thousands would pass a process's limit).
POOL_ABOVE_VUS = 1000


def _pool(scenarios: list[dict[str, Any]], sizing: dict[str, Any]) -> int | None:
    """A pool for a plan with many VUs: a few times rate × exchange time (Little's law, with
    the log's p95 as the exchange time, at least 10 ms), at least 10 connections."""
    vus = 0
    for scenario in scenarios:
        workload = scenario["workload"]
        vus += int(
            workload.get("max_vus")
            or max([workload.get("start_vus", 0), *(stage["vus"] for stage in workload["stages"])])
        )
    if vus <= POOL_ABOVE_VUS:
        return None
    exchange_s = max(0.01, float(sizing["p95_ms"] or 0.0) / 1000.0)
    return min(vus, max(10, math.ceil(4 * float(sizing["rate_per_s"]) * exchange_s)))


def _kind_scenarios(
    profile: Profile,
    options: PlanOptions,
    coverage: Coverage,
    kinds: Kinds,
    branches: list[dict[str, Any]],
    sizing: dict[str, Any],
    feeders: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """One scenario per client kind: the kept endpoints weighted by the kind's own requests, its
    share of the plan's rate (its share of the kept requests), its think time, and its VUs by
    Little's law (rate × (the kind's mean time + its think time)). Sizing gains ``kinds``."""
    step_of = {branch["steps"][0]["name"]: branch["steps"][0] for branch in branches}
    # The endpoints the plan sends (one not seen in the window has no branch). The kinds'
    # weights are their sampled sessions' requests over the whole log, not the window's.
    by_name = {stats.name: stats for stats in coverage.chosen if stats.name in step_of}
    kept_requests = [sum(kind.counts[name] for name in by_name) for kind in kinds.kinds]
    total = sum(kept_requests) or 1
    scenarios: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for number, (kind, requests) in enumerate(zip(kinds.kinds, kept_requests), start=1):
        if not requests:
            continue
        names = [name for name in by_name if kind.counts[name]]
        rate = round(sizing["rate_per_s"] * requests / total, 3)
        timed = [(kind.counts[name], by_name[name].timing) for name in names if by_name[name].timing.count]
        mean_ms = (
            sum(count * timing.mean() for count, timing in timed) / sum(count for count, _ in timed) if timed else 0.0
        )
        think_ms = min(kind.mean_think_ms(), MAX_THINK_TIME_MS) if options.model == "users" else 0.0
        vus = max(1, math.ceil(round(rate * (mean_ms + think_ms) / 1000.0, 6)))
        kind_branches = [
            {"weight": max(0.0001, round(100.0 * kind.counts[name] / requests, 4)), "steps": [step_of[name]]}
            for name in names
        ]
        steps: list[dict[str, Any]] = [{"type": "choice", "branches": kind_branches}]
        if options.model == "users" and round(think_ms, 3) > 0:
            steps.append({"type": "think", "think_time": {"type": "exponential", "mean_ms": round(think_ms, 3)}})
        kind_sizing = {**sizing, "rate_per_s": rate, "users": vus}
        scenario: dict[str, Any] = {
            "name": f"clients_{number}",
            "steps": steps,
            "workload": _workload(options, kind_sizing),
        }
        used = {
            template.split(".")[0].strip("{ ")
            for step in _steps_of(kind_branches)
            for template in _templates(step["path"])
        }
        if any(feeder["name"] in used for feeder in feeders):
            scenario["feeders"] = [feeder for feeder in feeders if feeder["name"] in used]
        scenarios.append(scenario)
        rows.append(
            {
                "scenario": scenario["name"],
                "sessions": kind.sessions,
                "share_of_requests": round(requests / total, 6),
                "requests_per_session": round(kind.mean_length(), 3),
                "rate_per_s": rate,
                "mean_ms": round(mean_ms, 3),
                "session_think_ms": round(kind.mean_think_ms(), 3),
                "think_ms": round(think_ms, 3),
                "vus": vus,
                "mix": {name: round(kind.counts[name] / requests, 6) for name in names},
            }
        )
    sizing["kinds"] = rows
    # The plan's VUs are the kinds' together, each sized with its own mean and think time.
    sizing["little"] = {**sizing["little"], "vus": sum(row["vus"] for row in rows), "by_kind": True}
    if options.model == "users":
        sizing["users"] = sizing["little"]["vus"]
    return scenarios


def _steps_of(branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [step for branch in branches for step in branch["steps"]]


def _templates(text: str) -> list[str]:
    return re.findall(r"\{\{(.*?)\}\}", text)


def _header(
    profile: Profile,
    options: PlanOptions,
    coverage: Coverage,
    left_out: list[dict[str, Any]],
    sizing: dict[str, Any],
    parameters: dict[str, str],
    intensity: Intensity,
) -> str:
    files = ", ".join(Path(name).name for name in profile.files)
    span = profile.to_dict()["source"]
    time_part = f" and {coverage.by_time * 100:.1f} % of the server's time" if profile.timed else ""
    lines = [
        f"Written by `horde profile` from {profile.requests:,} requests of {files}",
        f"({span['first_minute']} to {span['last_minute']}).",
        f"Endpoints: {len(coverage.chosen)}, {coverage.by_count * 100:.1f} % of the requests{time_part},"
        f" weighted by their requests in {intensity.describe()}:",
        f"  the largest by {options.by} to {options.cover_percent:g} % of the {'requests' if options.by == 'count' else 'time'}"
        + (
            f", and every endpoint at or above {options.min_share_percent:g} % of the requests or of the time."
            if options.min_share_percent > 0
            else "."
        ),
    ]
    if left_out:
        count = sum(row["share_by_count"] for row in left_out)
        lines.append(
            f"Left out: {len(left_out)} endpoint{'' if len(left_out) == 1 else 's'}, {count * 100:.2f} % of the requests"
            + (f", {sum(row['share_by_time'] for row in left_out) * 100:.2f} % of the time" if profile.timed else "")
            + (" (by share: requests, time):" if profile.timed else ":")
        )
        for row in left_out[:LEFT_OUT_NAMED]:
            lines.append(
                f"  {row['endpoint']}: {row['share_by_count'] * 100:.2f} %"
                + (f", {row['share_by_time'] * 100:.2f} %" if profile.timed else "")
            )
        if len(left_out) > LEFT_OUT_NAMED:
            lines.append(f"  and {len(left_out) - LEFT_OUT_NAMED} more (--json lists them all)")
    if options.window is not None:
        source = f"the window from {sizing['window']['start']} ({sizing['peak_minutes']} minutes of the log)"
    else:
        source = f"the peak {options.peak}" + (
            f" (over the {sizing['peak_minutes']} minutes of it the log covers)"
            if options.peak == "hour" and sizing["peak_minutes"] < 60
            else ""
        )
    factor = 1 + options.headroom_percent / 100
    lines.append(
        f"Rate: {sizing['peak_per_s']:g} req/s in {source}"
        + f" × the kept endpoints' {intensity.kept_share * 100:.1f} % of its requests × {factor:g} (headroom"
        f" {options.headroom_percent:g} %) = {sizing['rate_per_s']:g} req/s"
        + (
            f", as {sizing['users']} users looping request and think."
            if options.model == "users"
            else ", as an open model (one request per arrival)."
        )
    )
    lines.append(
        f"Per endpoint: its own requests in {intensity.describe()} / {intensity.window.seconds:g} s × {factor:g}"
        " (--json: plan.sizing.endpoints); the whole log's shares only decide which are kept."
    )
    unseen = intensity.unseen(coverage.chosen)
    if unseen:
        # Named, not dropped silently: kept by the whole log, but the window had none of them.
        short = (
            " (one minute is short: a rare endpoint misses it by chance; --peak hour gives its rate there)"
            if intensity.window.minutes == 1
            else ""
        )
        lines.append(
            f"Not seen in the peak window: {len(unseen)} kept endpoint{'' if len(unseen) == 1 else 's'}, rate 0, no branch"
            f" (the plan reproduces the window; a --window where {'it runs gives its' if len(unseen) == 1 else 'they run gives their'}"
            f" rate){short}:"
        )
        for stats in unseen:
            lines.append(
                f"  {stats.name}: {profile.share(stats, 'count') * 100:.2f} % of the log's requests"
                + (f", {profile.share(stats, 'time') * 100:.2f} % of its time" if profile.timed else "")
            )
    little = sizing["little"]
    if little.get("by_kind"):
        lines.append(
            f"Sizing by Little's law per client kind (below): VUs = rate × (mean time + think time), {little['vus']} VUs in all."
        )
    elif little["vus"] is not None:
        lines.append(
            f"Sizing by Little's law: VUs = rate × (mean time + think time) = {little['rate_per_s']:g} req/s × "
            f"({little['mean_ms']:g} ms + {little['think_ms']:g} ms) = {little['vus']} VU{'' if little['vus'] == 1 else 's'}"
            f" (the mean response time of the mix sent, the kept endpoints' by their requests in the window;"
            f" one VU sends {sizing['per_vu_rps']:g} req/s)."
        )
    lines += _kind_lines(sizing)
    lines += [
        "First a sighting shot (one VU, each endpoint's unloaded time):",
        f"  {sizing['sight_command']}",
        "then find-max's stepped ramp, steps that reach the rate in 20:",
        f"  {sizing['find_max_command']}",
    ]
    if parameters:
        lines.append(
            f"Secret query fields are parameters; give them with -p: {', '.join(f'-p {n}=...' for n in parameters)}"
        )
    lines += supply.comment_lines([stats for stats in coverage.chosen if intensity.counts[stats.name]])
    return "".join(f"# {line}\n" for line in lines)


def _kind_lines(sizing: dict[str, Any]) -> list[str]:
    """What the plan's comments say of the client kinds: how they were found, how well they
    separate, and each one's scenario."""
    found = sizing.get("kinds_found")
    if found is None:
        return []
    how = (
        f"by k-means on {found['sessions']:,} sessions' endpoint mix and pace (drawn uniformly from the log's "
        f"{found['paced_sessions']:,} sessions with a pause), k = 2 to {MAX_KINDS} chosen by the mean silhouette "
        f"(1: apart, 0: on the border)"
    )
    if found["kinds"] == 1:
        score = (
            f" (the best split's silhouette {found['silhouette']:g} is under {MIN_SILHOUETTE:g})"
            if found["silhouette"] is not None
            else ""
        )
        return [f"Client kinds: one, looked for {how}{score}."]
    lines = [f"Client kinds: {found['kinds']}, one scenario each, found {how}: {found['silhouette']:g}."]
    for row in sizing.get("kinds", []):
        mix = ", ".join(
            f"{name} {100 * share:.0f} %" for name, share in sorted(row["mix"].items(), key=lambda item: -item[1])[:3]
        )
        lines.append(
            f"  {row['scenario']}: {100 * row['share_of_requests']:.1f} % of the requests, {row['sessions']:,} sessions of "
            f"{row['requests_per_session']:g} requests, {row['session_think_ms']:g} ms apart; {row['rate_per_s']:g} req/s × "
            f"({row['mean_ms']:g} ms + {row['think_ms']:g} ms) = {row['vus']} VUs; {mix}"
        )
    return lines


def _iso_minute(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _yaml(data: dict[str, Any]) -> str:
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096  # one step, one line: long templated paths stay whole
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
