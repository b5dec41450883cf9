"""The engine's rules that the plan's pydantic types ask as they are built, so that a plan built
in code fails at the model being built: horde-plan words each problem and its hint
(``variable_name_problem``, ``method_problem``, ``target_problems``, ``workload_problems``,
``scenario_structure_problems``), and
the engine's own check of a plan says the same words. Nothing here decides anything; each
function asks the binding.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from horde import _engine
from horde.plan.common import Located, custom, parse_path

#: The HTTP methods an http step sends, upper case: horde-plan's list.
METHODS: tuple[str, ...] = tuple(_engine.http_methods())


def check_variable_name(name: str, what: str) -> str:
    """``name``, when the engine accepts it as a variable's (``what`` says whose: "feeder
    name", "variable"); a located pydantic error with the engine's message and hint otherwise."""
    problem = _engine.variable_name_problem(name, what)
    if problem is not None:
        message, hint = problem
        raise custom("variable_name", message, hint)
    return name


def check_method(method: str) -> str:
    """``method``, when an http step can send it; the engine's problem and hint otherwise."""
    problem = _engine.method_problem(method)
    if problem is not None:
        message, hint = problem
        raise custom("method", message, hint)
    return method


def target_problems(target_json: str) -> list[Located]:
    """The engine's problems of a target (its JSON as the engine reads it), each located
    relative to the target, with the engine's message and hint."""
    return _located(_engine.target_problems(target_json), target_json, "target.")


def workload_problems(workload_json: str) -> list[Located]:
    """The engine's problems of a workload, located relative to it (as :func:`target_problems`)."""
    return _located(_engine.workload_problems(workload_json), workload_json, "workload.")


def scenario_structure_problems(data: Any) -> list[Located]:
    """The engine's problems that span a scenario's step lists (names unique at any depth, how
    deep steps nest, feeders and the variables named like them, pacing against the workload),
    asked of the scenario's input as given, before its types are read, so that they are listed
    with the types' own problems; each located from the scenario."""
    if not isinstance(data, dict):
        return []  # a scenario already built, or no mapping at all: the types say so
    document_json = json.dumps(_plain(data, 0))
    return _located(_engine.scenario_structure_problems(document_json), document_json, "")


#: How deep :func:`_plain` copies: past every place a structure rule reads (steps nested to
#: MAX_STEP_DEPTH inside choices' branches), and short of the engine's JSON reader's bound.
_PLAIN_DEPTH = 100


def _plain(value: Any, depth: int) -> Any:
    """``value`` as JSON the engine reads: models built in code dumped as the plan's file writes
    them; what JSON cannot hold (a set, NaN, an object), and what lies deeper than the rules read,
    as null, which the rules leave to the types."""
    if depth > _PLAIN_DEPTH:
        return None
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(by_alias=True), depth)
    if isinstance(value, dict):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value if value is None or isinstance(value, (str, int, bool)) else None


def _located(found: list[tuple[str, str, str | None]], document_json: str, prefix: str) -> list[Located]:
    if not found:
        return []
    document = json.loads(document_json)
    located: list[Located] = []
    for path, message, hint in found:
        location = parse_path(path.removeprefix(prefix))
        located.append((location, _value_at(document, location), custom("engine_rule", message, hint or "")))
    return located


def _value_at(document: Any, location: tuple[str | int, ...]) -> Any:
    """What the problem is about, for the error's input (None where the path leaves the document)."""
    for part in location:
        try:
            document = document[part]
        except (KeyError, IndexError, TypeError):
            return None
    return document
