"""The plan a production profile writes (``horde profile --plan FILE``).

One scenario, ``production``: a weighted ``choice`` of the endpoints that cover the chosen share
of the traffic (by count, or by time: the heaviest first), each with its method and path
template, the weights being the endpoints' request counts (so the mix Horde sends is the log's
mix among them). Ids come from the values the log showed (a sample drawn uniformly over the
requests, so frequent ids stay frequent), inline or in a feeder file written beside the plan;
values that must not leave the log (secret query fields, e-mail addresses, tokens) never do:
a secret query field becomes a plan parameter (``-p token=...``), an address or a token a
generated value.

The workload carries the log's peak rate (its busiest minute, or hour) times a headroom: as an
open model (arrivals at that rate, one request each) or as users (VUs looping request, think
time, at the per-user rate the sessions show). Beside it, the seed's sizing: one VU sends
x = 1000 / t requests a second (t the log's median time), so the rate needs rate / x VUs; a
sighting shot first (``horde sight PLAN``), then find-max's stepped ramp in steps that reach
the rate in :data:`~horde.control.sight.SUGGESTED_STEPS` (``--find-max`` writes it into the
plan's ``steer``). The plan is checked on both sides (pydantic and the engine) before it is
kept: written to a temporary file beside it, checked, then renamed, so that a plan that fails
its check is never left on disk.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from ruamel.yaml import YAML

from horde.control.sight import SUGGESTED_STEP_DURATION_S, SUGGESTED_STEPS, nice_number
from horde.engine.run import checked_plan_json
from horde.errors import InvalidInput, PlanInvalid, Problem
from horde.plan import MAX_THINK_TIME_MS, METHODS
from horde.plan.loader import load_plan_file
from horde.profile.endpoints import Slot
from horde.profile.profile import EndpointStats, Profile

MODELS: Final = ("open", "users")
IDS: Final = ("seen", "feeder")
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
    headroom_percent: float = 20.0
    model: str = "open"
    duration_s: float = 300.0
    ramp_up_s: float = 60.0
    ids: str = "seen"
    peak: str = "minute"
    find_max: bool = False

    def check_choices(self) -> None:
        """InvalidInput for a choice that is none of its flag's: told before any log is read."""
        if self.by not in ("count", "time"):
            raise InvalidInput(f"--by: {self.by!r} is neither count nor time", hint="--by count (the default) or --by time")
        if self.model not in MODELS:
            raise InvalidInput(f"--model: {self.model!r} is not a workload", hint="--model open (arrivals) or --model users (VUs)")
        if self.ids not in IDS:
            raise InvalidInput(f"--ids: {self.ids!r} is neither seen nor feeder", hint="--ids seen (inline) or --ids feeder (a CSV file)")
        if self.peak not in ("minute", "hour"):
            raise InvalidInput(f"--peak: {self.peak!r} is neither minute nor hour", hint="--peak minute (the default) or --peak hour")

    def check(self, profile: Profile) -> None:
        """InvalidInput for a choice the profile cannot honour."""
        self.check_choices()
        if self.by == "time" and not profile.timed:
            raise InvalidInput("--by time needs response times, and this log has none",
                               hint="log $request_time (nginx) or %D (Apache), or use --by count")
        if self.model == "users" and profile.per_user_rate() is None:
            raise InvalidInput("--model users needs think times, and no session of this log had a second request",
                               hint="key sessions with --session cookie:NAME, or use --model open")


@dataclass
class WrittenPlan:
    """What was written: the plan, its feeder files, the endpoints chosen and the sizing."""

    path: Path
    feeders: list[Path]
    endpoints: list[dict[str, Any]]
    covered_share: float
    sizing: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "feeders": [str(path) for path in self.feeders],
                "covered_share": round(self.covered_share, 6), "endpoints": self.endpoints,
                "sizing": self.sizing, "notes": self.notes}


def choose_endpoints(profile: Profile, by: str, cover_percent: float) -> tuple[list[EndpointStats], float, list[str]]:
    """The endpoints (with a method Horde sends), largest share first, until they cover
    ``cover_percent`` of the traffic by ``by``; their share together; notes on what was left."""
    notes: list[str] = []
    ranked = sorted(profile.endpoints, key=lambda stats: (-profile.share(stats, by), -stats.count, stats.name))
    chosen: list[EndpointStats] = []
    covered = 0.0
    for stats in ranked:
        if covered * 100.0 >= cover_percent:
            break
        if stats.shape.method not in METHODS:
            notes.append(f"{stats.name}: {stats.shape.method} is not a method Horde sends (left out)")
            continue
        chosen.append(stats)
        covered += profile.share(stats, by)
    if not chosen:
        raise InvalidInput("no endpoint of the log has a method Horde sends", hint=f"Horde sends {', '.join(METHODS)}")
    return chosen, covered, notes


def write_plan(profile: Profile, path: Path, options: PlanOptions) -> WrittenPlan:
    """Writes the plan (and its feeder files) to ``path``; checks it on both sides first."""
    options.check(profile)
    chosen, covered, notes = choose_endpoints(profile, options.by, options.cover_percent)
    feeder_dir = path.parent / f"{path.stem}.feeders"
    feeders: dict[str, list[list[str]]] = {}
    parameters: dict[str, str] = {}
    total = sum(stats.count for stats in chosen)
    branches = []
    rows = []
    for stats in chosen:
        step_path = _path_template(stats, options.ids, feeders, parameters)
        weight = max(0.0001, round(100.0 * stats.count / total, 4))
        branches.append({"weight": weight, "steps": [{"name": stats.name, "method": stats.shape.method, "path": step_path}]})
        rows.append({"endpoint": stats.name, "weight": weight, "share_by_count": round(profile.share(stats, "count"), 6)})
    sizing = _sizing(profile, options, path)
    steps: list[dict[str, Any]] = [{"type": "choice", "branches": branches}]
    if options.model == "users":
        think_ms = min(profile.sessions.think_ms.mean(), MAX_THINK_TIME_MS)
        steps.append({"type": "think", "think_time": {"type": "exponential", "mean_ms": round(think_ms, 3)}})
    scenario: dict[str, Any] = {"name": "production", "steps": steps, "workload": _workload(options, sizing)}
    if feeders:
        scenario["feeders"] = [{"name": name, "path": f"{feeder_dir.name}/{name}.csv", "format": "csv", "mode": "random"}
                               for name in feeders]
    data: dict[str, Any] = {"version": 1, "name": "production-profile"}
    if parameters:
        data["parameters"] = parameters
    data["target"] = {"base_url": options.base_url}
    pool = _pool(scenario["workload"], sizing)
    if pool is not None:
        data["target"]["connections"] = {"pool": pool}
    data["scenarios"] = [scenario]
    if options.find_max:
        data["steer"] = {"type": "find_max", **{key: sizing["find_max"][key] for key in ("start", "step", "step_duration_s")}}
    written = _write_checked(path, _header(profile, options, covered, sizing, parameters) + _yaml(data),
                             feeder_dir, {f"{name}.csv": _csv(table) for name, table in feeders.items()})
    return WrittenPlan(path, written, rows, covered, sizing, notes)


def _write_checked(path: Path, text: str, feeder_dir: Path, feeders: dict[str, str]) -> list[Path]:
    """Writes the plan and its feeder files, the plan only once checked on both sides: first to
    a temporary file in its folder (its feeders found from there as from the plan), then renamed
    over ``path``. A plan that fails its check is not left on disk, nor are the feeder files
    written for it (an older plan at ``path`` stays as it was). The feeder files written."""
    written: list[Path] = []
    made_dir = False
    temporary: Path | None = None
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if feeders:
                made_dir = not feeder_dir.exists()
                feeder_dir.mkdir(exist_ok=True)
                for name, table in feeders.items():
                    written.append(feeder_dir / name)
                    written[-1].write_text(table, encoding="utf-8")
            # Made as any file is (the umask's permissions), under a name no one else takes.
            temporary = path.parent / f".{path.stem}.{uuid.uuid4().hex[:12]}{path.suffix}"
            with temporary.open("x", encoding="utf-8") as out:
                out.write(text)
        except OSError as error:
            raise InvalidInput(f"cannot write the plan to {path}: {error.strerror or error}", hint="give a writable path with --plan") from error
        try:
            loaded = load_plan_file(temporary)
            checked_plan_json(loaded.plan, locate=loaded.located, source=str(path))
        except PlanInvalid as error:
            # Told as the plan's own problems: the temporary file's name means nothing to the reader.
            raise PlanInvalid([Problem(problem.location.replace(str(temporary), str(path)), problem.message, problem.hint)
                               for problem in error.problems], source=f"{path} (not written)") from None
        os.replace(temporary, path)
        temporary = None
        return written
    except BaseException:
        for file in written:
            file.unlink(missing_ok=True)
        if made_dir:
            shutil.rmtree(feeder_dir, ignore_errors=True)
        raise
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def _path_template(stats: EndpointStats, ids: str, feeders: dict[str, list[list[str]]], parameters: dict[str, str]) -> str:
    """The step's path: the endpoint's literal parts, each slot as a template drawing its values."""
    shape = stats.shape
    kept = [i for i, _ in enumerate(shape.slots) if any(sample[i] is not None for sample in stats.samples)]
    feeder_name = f"endpoint_{stats.index}"
    columns: dict[int, str] = {}
    if ids == "feeder" and kept:
        rows = [[str(sample[i]) for i in kept] for sample in stats.samples
                if all(sample[i] is not None and _SAFE_VALUE.fullmatch(str(sample[i])) for i in kept)]
        if rows:
            names = _column_names([shape.slots[i] for i in kept])
            columns = dict(zip(kept, names))
            feeders[feeder_name] = [names, *rows]

    def value(index: int) -> str:
        slot = shape.slots[index]
        if index in columns:
            return "{{ " + f"{feeder_name}.{columns[index]}" + " }}"
        seen = [str(sample[index]) for sample in stats.samples if sample[index] is not None
                and _SAFE_VALUE.fullmatch(str(sample[index]))][:INLINE_VALUES]
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


def _sizing(profile: Profile, options: PlanOptions, path: Path) -> dict[str, Any]:
    """The rate to plan for and the seed's sizing around it."""
    peak = profile.peak_per_s(options.peak)
    rate = round(peak * (1.0 + options.headroom_percent / 100.0), 3)
    median_ms = profile.overall.percentile(50) if profile.timed else None
    sizing: dict[str, Any] = {
        "peak": options.peak,
        "peak_per_s": round(peak, 3),
        # The minutes the peak was measured over: 1, or the part of its hour the log covers.
        "peak_minutes": 1 if options.peak == "minute" else profile.hour_covered(profile.peak_hour()[0])[1],
        "headroom_percent": options.headroom_percent,
        "rate_per_s": rate,
        "median_ms": round(median_ms, 3) if median_ms else None,
        "p95_ms": round(profile.overall.percentile(95), 3) if profile.timed else None,
        # The seed's x = 1000 / t: what one VU sends a second when each request takes t.
        "per_vu_rps": round(1000.0 / median_ms, 3) if median_ms else None,
        "vus_at_rate": math.ceil(rate * median_ms / 1000.0) if median_ms else None,
    }
    per_user = profile.per_user_rate()
    sizing["per_user_rate_per_s"] = round(per_user, 6) if per_user else None
    if options.model == "users" and per_user:
        users = max(1, math.ceil(rate / per_user))
        sizing["users"] = users
        step: float = max(1.0, float(math.ceil(users / SUGGESTED_STEPS)))
        unit = "VUs"
    else:
        step = nice_number(rate / SUGGESTED_STEPS)
        unit = "arrivals/s"
    sizing["find_max"] = {"unit": unit, "start": step, "step": step, "step_duration_s": SUGGESTED_STEP_DURATION_S,
                          "up_to": sizing.get("users", rate)}
    sizing["sight_command"] = f"horde sight {path}"
    sizing["find_max_command"] = (f"horde run {path} --find-max --start {step:g} --step {step:g} "
                                  f"--step-duration {SUGGESTED_STEP_DURATION_S}s")
    return sizing


def _workload(options: PlanOptions, sizing: dict[str, Any]) -> dict[str, Any]:
    ramp = min(options.ramp_up_s, options.duration_s)
    hold = options.duration_s - ramp
    if options.model == "users":
        users = sizing["users"]
        stages = ([{"duration_s": ramp, "vus": users}] if ramp > 0 else []) + ([{"duration_s": hold, "vus": users}] if hold > 0 else [])
        return {"type": "closed", "start_vus": 0 if ramp > 0 else users, "stages": stages}
    rate = sizing["rate_per_s"]
    # Little's law with room: the VUs busy at once are rate × latency; allow 2 s each (or 4 × the
    # log's p95), so that a slower test target shows as latency before arrivals are dropped.
    p95_s = (sizing["p95_ms"] or 0.0) / 1000.0
    max_vus = max(10, math.ceil(rate * max(2.0, 4.0 * p95_s)))
    stages = ([{"duration_s": ramp, "rate_per_s": rate}] if ramp > 0 else []) + ([{"duration_s": hold, "rate_per_s": rate}] if hold > 0 else [])
    return {"type": "open", "start_rate_per_s": 0 if ramp > 0 else rate, "max_vus": max_vus, "stages": stages}


#: VUs beyond which the plan's VUs share a pool of connections rather than one each (a
#: connection per VU is an open file per VU: tens of thousands would pass a process's limit).
POOL_ABOVE_VUS = 1000


def _pool(workload: dict[str, Any], sizing: dict[str, Any]) -> int | None:
    """A pool for a plan with many VUs: a few times rate × exchange time (Little's law, with
    the log's p95 as the exchange time, at least 10 ms), at least 10 connections."""
    vus = int(workload.get("max_vus") or max([workload.get("start_vus", 0), *(stage["vus"] for stage in workload["stages"])]))
    if vus <= POOL_ABOVE_VUS:
        return None
    exchange_s = max(0.01, float(sizing["p95_ms"] or 0.0) / 1000.0)
    return min(vus, max(10, math.ceil(4 * float(sizing["rate_per_s"]) * exchange_s)))


def _header(profile: Profile, options: PlanOptions, covered: float, sizing: dict[str, Any],
            parameters: dict[str, str]) -> str:
    files = ", ".join(Path(name).name for name in profile.files)
    span = profile.to_dict()["source"]
    lines = [
        f"Written by `horde profile` from {profile.requests:,} requests of {files}",
        f"({span['first_minute']} to {span['last_minute']}).",
        f"Endpoints covering {covered * 100:.1f} % of the requests by {options.by}, weighted by their counts.",
        f"Workload: the peak {options.peak}'s {sizing['peak_per_s']:g} req/s"
        + (f" (over the {sizing['peak_minutes']} minutes of it the log covers)" if options.peak == "hour" and sizing["peak_minutes"] < 60 else "")
        + f" plus {options.headroom_percent:g} % "
        f"headroom = {sizing['rate_per_s']:g} req/s"
        + (f", as {sizing['users']} users at {sizing['per_user_rate_per_s']:g} req/s each." if options.model == "users"
           else ", as an open model (one request per arrival)."),
    ]
    if sizing["median_ms"]:
        lines.append(f"Sizing: median {sizing['median_ms']:g} ms, so one VU sends x = 1000 / t = "
                     f"{sizing['per_vu_rps']:g} req/s and the rate needs about {sizing['vus_at_rate']} "
                     f"VU{'' if sizing['vus_at_rate'] == 1 else 's'} busy at once (TPS = VUs × x).")
    lines += [
        "First a sighting shot (one VU, each endpoint's unloaded time):",
        f"  {sizing['sight_command']}",
        "then find-max's stepped ramp, steps that reach the rate in 20:",
        f"  {sizing['find_max_command']}",
    ]
    if parameters:
        lines.append(f"Secret query fields are parameters; give them with -p: {', '.join(f'-p {n}=...' for n in parameters)}")
    return "".join(f"# {line}\n" for line in lines)


def _yaml(data: dict[str, Any]) -> str:
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096  # one step, one line: long templated paths stay whole
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()

