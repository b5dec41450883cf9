"""The plan's semantic rules, asked of their one owner: the engine (``crates/horde-plan``).

pydantic reads a plan's types, defaults and keys; what the values must mean together (a step
sends a body or JSON, not both; a path starts with '/'; a range is not upside down) is the
engine's to say, with the same message and hint wherever a plan comes from. :func:`rule_problems`
asks it once pydantic has read the plan, so that :func:`~horde.plan.problems.plan_from_dict` and
the file loader report those problems as they report pydantic's: located, with a hint.

A plan is checked once on its way in: the engine's check is a function of the plan's JSON alone,
so :func:`engine_check` remembers the last few plans it found nothing in, and the control plane's
check before a run (``engine.run.checked_plan_json``) asks the engine again only for a plan that
changed since (a flag reshaped it, a steering prepared it). The engine checks once more at its own
door, ``start_run``, as it must: a generator on another node receives only JSON.

>>> parse_path("scenarios[0].steps[12].path")
('scenarios', 0, 'steps', 12, 'path')
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from horde import _engine
from horde.plan.bounds import MAX_PROBLEMS
from horde.plan.common import Loc, parse_path
from horde.plan.model import Plan, plan_to_json

#: How the engine words a part the plan's author must still give, a ``supply(...)`` template
#: (crates/horde-plan's ``SUPPLY_PREFIX``). Not a mistake in the plan as read: a plan ``horde
#: profile`` wrote loads, and the check before a run (``checked_plan_json``) lists each part.
TO_SUPPLY = "to supply: "


def is_to_supply(message: str) -> bool:
    """Whether the engine's problem is a part left to the plan's author (``supply(...)``).

    >>> is_to_supply("to supply: the body of POST /orders; put it in place of the supply(...) template")
    True
    """
    return message.startswith(TO_SUPPLY)


def _mistakes(found: list[tuple[str, str, str | None]]) -> list[tuple[Loc, str, str | None]]:
    return [(parse_path(path), message, hint) for path, message, hint in found if not is_to_supply(message)]


#: How many accepted plans :func:`engine_check` remembers (by digest): a run's plan, its steered
#: and overridden forms, a study's plans per instance count.
_ACCEPTED_KEPT = 16
_accepted: OrderedDict[bytes, None] = OrderedDict()
_accepted_lock = threading.Lock()


def engine_check(plan_json: str) -> list[tuple[str, str, str | None]]:
    """The engine's problems with a plan's JSON (path, message, hint), every one of them, the
    parts left to supply included; a JSON the engine found nothing in is not checked again."""
    digest = hashlib.sha256(plan_json.encode()).digest()
    with _accepted_lock:
        if digest in _accepted:
            _accepted.move_to_end(digest)
            return []
    found = _engine.validate_plan(plan_json)
    if not found:
        with _accepted_lock:
            _accepted[digest] = None
            while len(_accepted) > _ACCEPTED_KEPT:
                _accepted.popitem(last=False)
    return found


def rule_problems(plan: Plan) -> list[tuple[Loc, str, str | None]]:
    """Every mistake the engine finds in a plan pydantic has read: (location, message, hint)."""
    return _mistakes(engine_check(plan_to_json(plan)))


#: How serde words where decoding stopped (a type, a missing or unknown key): the engine read
#: no plan, so it checked no rule.
_DECODING_STOPPED = re.compile(r" at line \d+ column \d+$")
#: The lists whose items are steps: a step pydantic refused stands in as one that checks nothing.
_STEP_LISTS = frozenset({"steps", "setup", "teardown", "then", "else"})
_NO_STEP: dict[str, Any] = {"type": "end_iteration"}
#: Repairs tried before giving up on a plan the engine cannot decode (each one is at a new place).
_MAX_REPAIRS = 20


def _within(loc: Loc, outer: Loc) -> bool:
    return loc[: len(outer)] == outer


#: A think time pydantic refused stands in as a pause of nothing.
_NO_PAUSE: dict[str, Any] = {"type": "constant", "duration_ms": 0}
#: The plan's own keys a plan may leave out (serde's defaults stand in for them).
_REQUIRED_AT_TOP = frozenset({"target", "scenarios"})


def _stand_in(data: Any, loc: Loc, message: str = "") -> Loc | None:
    """Makes a place pydantic refused, or where the engine stopped decoding, decodable: an
    unknown key is dropped, a step becomes one that checks nothing, a think time no pause, a
    workload the least one; the place stood in for, or None where nothing can stand in (the
    target, a scenario's own keys)."""
    if message.startswith("unknown field") and loc:
        parent = _node(data, loc[:-1])
        if isinstance(parent, dict) and loc[-1] in parent:
            del parent[loc[-1]]
            return loc
        return None
    if len(loc) >= 1 and isinstance(data, dict) and loc[0] in data and loc[0] not in _REQUIRED_AT_TOP:
        if loc[0] == "version":
            data["version"] = 1
        else:
            del data[loc[0]]
        return loc[:1]
    for end in range(len(loc), 1, -1):
        key, index = loc[end - 2], loc[end - 1]
        parent = _node(data, loc[: end - 1])
        if index == "think_time" and isinstance(parent, dict) and isinstance(parent.get("think_time"), dict):
            parent["think_time"] = dict(_NO_PAUSE)
            return loc[:end]
        if key in _STEP_LISTS and isinstance(index, int) and isinstance(parent, list) and index < len(parent):
            parent[index] = dict(_NO_STEP)
            return loc[:end]
        if (
            index == "workload"
            and isinstance(parent, dict)
            and "workload" in parent
            and loc[:1] == ("scenarios",)
            and end == 3
        ):
            open_model = isinstance(parent["workload"], dict) and parent["workload"].get("type") == "open"
            parent["workload"] = (
                {"type": "open", "stages": [{"duration_s": 1, "rate_per_s": 1}], "max_vus": 1}
                if open_model
                else {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]}
            )
            return loc[:end]
    return None


def _node(data: Any, loc: Loc) -> Any:
    node = data
    for key in loc:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    return node


def rule_problems_beside(data: Any, reported: list[Loc]) -> list[tuple[Loc, str, str | None]]:
    """The engine's problems of a plan pydantic refused, beside pydantic's own (at ``reported``):
    every problem of a plan is listed at once, whichever side owns its rule.

    Where pydantic refused a step or a workload the engine could not decode either, one that
    checks nothing stands in for it, and the engine's problems there (and, in its scenario, of
    variables it may have set) are left to pydantic's; a place pydantic reported is reported once.
    Where nothing can stand in (a refused target), the engine's problems wait for pydantic's to
    be fixed."""
    if len(reported) >= MAX_PROBLEMS:
        return []  # past a few dozen problems a reader stops reading
    try:
        copy = json.loads(json.dumps(data, allow_nan=False))
    except (TypeError, ValueError):
        return []
    stood_in: list[Loc] = []
    # A think time or a workload pydantic refused stands in at once: serde stops at the step or
    # the scenario that holds it, and would leave the whole step or scenario unchecked.
    for loc in reported:
        if "think_time" in loc or "workload" in loc:
            place = _stand_in(copy, loc[: loc.index("think_time" if "think_time" in loc else "workload") + 1])
            if place is not None and place not in stood_in:
                stood_in.append(place)
    for _ in range(_MAX_REPAIRS):
        found = _engine.validate_plan(json.dumps(copy))
        if not (len(found) == 1 and _DECODING_STOPPED.search(found[0][1])):
            break
        path, message, _ = found[0]
        place = _stand_in(copy, parse_path(path), message)
        if place is None or place in stood_in:
            return []
        stood_in.append(place)
    else:
        return []
    # A scenario where something was refused or stood in for may have lost a variable it sets:
    # the engine's unknown variables there follow from pydantic's problems.
    touched = {place[:2] for place in (*stood_in, *reported) if place[:1] == ("scenarios",)}

    def kept(loc: Loc, message: str) -> bool:
        if any(_within(loc, place) for place in stood_in):
            return False
        if loc[:2] in touched and message.startswith("unknown variable '"):
            return False
        # One problem a place: pydantic's, where it reported this place, within it or around it.
        return not any(
            (_within(loc, place) or _within(place, loc)) if place and loc else loc == place for place in reported
        )

    return [(loc, message, hint) for loc, message, hint in _mistakes(found) if kept(loc, message)]
