"""Scenarios in Python: a small typed builder that reads like the behaviour and lowers to the plan.

Every function returns a small immutable piece (a step, a think time, a workload...) that lowers
to exactly the plain data a YAML file would hold; :func:`plan` assembles them, substitutes the
plan parameters and validates the result into a :class:`horde.plan.Plan` — the same plan, byte
for byte in :func:`horde.plan.plan_to_json`, as the same scenario written in YAML.

>>> from horde import (plan, scenario, http, group, choice, branch, think, closed, stage,
...                    extract, check, uniform, param)
>>> game = plan(
...     "game",
...     base_url="http://127.0.0.1:8080",
...     parameters={"vus": 20},
...     scenarios=[
...         scenario(
...             "player",
...             setup=[http.post("register", "/game/register", json={"name": "vu-{{ vu }}"},
...                              extract=[extract.json("token", "$.token")],
...                              checks=[check.status(200, 201)])],
...             headers={"authorization": "Bearer {{ token }}"},
...             steps=[
...                 choice(
...                     branch(70, http.get("city", "/game/city", think_time=uniform(500, 1500))),
...                     branch(30, group("build",
...                                      http.get("buildings", "/game/buildings",
...                                               extract=[extract.json(
...                                                   "building", "$.buildings[?@.can_build].id",
...                                                   pick="random")]),
...                                      http.post("construct", "/game/buildings/{{ building }}"))),
...                 ),
...                 think(1000),
...             ],
...             workload=closed([stage(10, vus=param("vus")), stage(50, vus=param("vus"))]),
...         )
...     ],
... )
>>> game.scenarios[0].workload.stages[0].vus, [s.name for s in game.scenarios[0].all_steps() if s.type == "http"]
(20, ['register', 'city', 'buildings', 'construct'])

Parameters: :func:`param` writes a reference (``{{ params.vus }}``) wherever a value may go,
including inside a string (``f"/items?limit={param('limit')}"``). :func:`plan` replaces it by the
parameter's value: ``-p`` (when ``horde run`` loads this module), ``HORDE_PARAM_NAME``, else the
default given in ``parameters``.

A plan module (``horde run plan.py``) defines a module-level ``plan``; write it
``plan = horde.plan(...)`` (after ``import horde``), so the name stays free for the result.

Names follow GLOSSARY.md and the plan's wire names; where a wire name is a Python keyword the
argument ends with ``_`` (``while_``, ``as_``, ``else_``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, overload

from horde.errors import PlanInvalid, Problem
from horde.plan.bounds import MAX_DEPTH, shape_problems
from horde.plan.problems import format_path
from horde.plan.model import Plan
from horde.plan.common import Method, is_identifier
from horde.plan.loader import check_plan_data
from horde.plan.parameters import apply_parameters, current_explicit_parameters

__all__ = [
    "BranchSpec",
    "CheckSpec",
    "ClosedStageSpec",
    "ExtractorSpec",
    "FeederSpec",
    "OpenStageSpec",
    "Param",
    "ScenarioSpec",
    "StepSpec",
    "ThinkTimeSpec",
    "WorkloadSpec",
    "branch",
    "check",
    "choice",
    "closed",
    "constant",
    "end_iteration",
    "exponential",
    "normal",
    "extract",
    "feeder",
    "group",
    "http",
    "loop",
    "message",
    "open_model",
    "parallel",
    "param",
    "plan",
    "scenario",
    "stage",
    "think",
    "uniform",
    "when",
]

#: A JSON value (a request's JSON body, an extractor's default, a check's expected value).
JSON = Union[None, bool, int, float, str, Sequence["JSON"], Mapping[str, "JSON"]]


class Param(str):
    """A reference to a plan parameter, written ``{{ params.NAME }}``: see :func:`param`."""

    name: str

    def __new__(cls, name: str) -> Param:
        if not is_identifier(name):
            raise ValueError(f"'{name}' is not a valid parameter name (letters, digits and '_')")
        reference = super().__new__(cls, "{{ params." + name + " }}")
        reference.name = name
        return reference

    def __repr__(self) -> str:
        return f"param({self.name!r})"


def param(name: str) -> Param:
    """A reference to parameter ``name``, for any value of a plan: :func:`plan` replaces it by
    the parameter's value. It is a ``str``, so it also goes inside strings.

    >>> param("vus"), str(param("vus")), f"/items?limit={param('limit')}"
    (param('vus'), '{{ params.vus }}', '/items?limit={{ params.limit }}')
    """
    return Param(name)


Number = Union[int, float, Param]
Count = Union[int, Param]
Headers = Mapping[str, str]


def _plain(value: Any, depth: int = 0) -> Any:
    """Plain data: a Param as its text, mappings as dicts, sequences as lists (copies).

    A value nested past the plan's bound (:data:`horde.plan.bounds.MAX_DEPTH`, a list that
    contains itself included) is cut there, an empty list standing for what was deeper: the
    copy stays within Python's recursion, and :func:`plan` refuses it where it is ("values nest
    deeper than 64 levels") instead of a RecursionError.

    >>> deep: list[Any] = []
    >>> deep.append(deep)
    >>> _plain(deep, depth=MAX_DEPTH - 1)
    [[[]]]
    """
    if isinstance(value, str):
        return str(value)
    if depth > MAX_DEPTH and isinstance(value, (Mapping, Sequence)):
        return []
    if isinstance(value, Mapping):
        return {str(key): _plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, Sequence):
        return [_plain(item, depth + 1) for item in value]
    return value


class _Piece:
    """A part of a plan as the plain data it lowers to."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = {key: _plain(value) for key, value in data.items() if value is not None}

    def lower(self) -> dict[str, Any]:
        """The plain data (a copy), as a YAML or JSON plan file would write it."""
        return copy.deepcopy(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Piece) and type(other) is type(self) and other._data == self._data

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self._data)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


class StepSpec(_Piece):
    """A step: an HTTP request, a message step or control flow (made by :data:`http`,
    :data:`message`, :func:`group`, :func:`choice`, :func:`loop`, :func:`when`, :func:`think`,
    :func:`end_iteration`)."""


class ThinkTimeSpec(_Piece):
    """A think time (:func:`constant`, :func:`uniform`, :func:`normal`, :func:`exponential`)."""


class ExtractorSpec(_Piece):
    """An extractor (made by :data:`extract`)."""


class CheckSpec(_Piece):
    """A check (made by :data:`check`)."""


class FeederSpec(_Piece):
    """A feeder (:func:`feeder`)."""


class BranchSpec(_Piece):
    """A branch of a :func:`choice` (:func:`branch`)."""


class ClosedStageSpec(_Piece):
    """A stage of the closed model: ``stage(duration_s, vus=N)``."""


class OpenStageSpec(_Piece):
    """A stage of the open model: ``stage(duration_s, rate_per_s=R)``."""


class WorkloadSpec(_Piece):
    """A workload model (:func:`closed`, :func:`open_model`)."""


class ScenarioSpec(_Piece):
    """A scenario (:func:`scenario`)."""


def _steps(steps: Sequence[StepSpec]) -> list[dict[str, Any]]:
    return [step.lower() for step in steps]


# --- think times -------------------------------------------------------------------------------


def constant(duration_ms: Number) -> ThinkTimeSpec:
    """The same pause every time, in milliseconds.

    >>> constant(250).lower()
    {'type': 'constant', 'duration_ms': 250}
    """
    return ThinkTimeSpec({"type": "constant", "duration_ms": duration_ms})


def uniform(min_ms: Number, max_ms: Number) -> ThinkTimeSpec:
    """A pause drawn uniformly between ``min_ms`` and ``max_ms``."""
    return ThinkTimeSpec({"type": "uniform", "min_ms": min_ms, "max_ms": max_ms})


def normal(mean_ms: Number, stddev_ms: Number) -> ThinkTimeSpec:
    """A pause drawn from a normal distribution (cut at 0): reading times that cluster."""
    return ThinkTimeSpec({"type": "normal", "mean_ms": mean_ms, "stddev_ms": stddev_ms})


def exponential(mean_ms: Number) -> ThinkTimeSpec:
    """A pause drawn from an exponential distribution of mean ``mean_ms`` (a Poisson process)."""
    return ThinkTimeSpec({"type": "exponential", "mean_ms": mean_ms})


# --- HTTP steps --------------------------------------------------------------------------------

OnCheckFailure = Literal["continue", "end_iteration"]


class _Http:
    """HTTP steps: ``http.get(name, path, ...)``, ``http.post(...)``..., or
    ``http.request(method, name, path, ...)``.

    ``path``, header values and ``body`` are templates (``"/items/{{ item_id }}"``); ``json`` is a
    JSON body (its strings are templates) instead of ``body``; ``extract`` and ``checks`` read the
    response; ``think_time`` is the pause after the step.

    >>> http.get("home", "/", checks=[check.status(200)]).lower()
    {'type': 'http', 'name': 'home', 'method': 'GET', 'path': '/', 'checks': [{'type': 'status', 'in': [200]}]}
    """

    def request(
        self,
        method: Method,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        body: str | None = None,
        json: JSON = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """An HTTP request of any method."""
        return StepSpec(
            {
                "type": "http",
                "name": name,
                "method": method,
                "path": path,
                "headers": dict(headers) if headers is not None else None,
                "body": body,
                "json": json,
                "think_time": think_time.lower() if think_time is not None else None,
                "extract": [e.lower() for e in extract] or None,
                "checks": [c.lower() for c in checks] or None,
                "on_check_failure": on_check_failure,
            }
        )

    def get(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A GET request."""
        return self.request(
            "GET",
            name,
            path,
            headers=headers,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def head(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A HEAD request."""
        return self.request(
            "HEAD",
            name,
            path,
            headers=headers,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def delete(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A DELETE request."""
        return self.request(
            "DELETE",
            name,
            path,
            headers=headers,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def options(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """An OPTIONS request."""
        return self.request(
            "OPTIONS",
            name,
            path,
            headers=headers,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def post(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        body: str | None = None,
        json: JSON = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A POST request."""
        return self.request(
            "POST",
            name,
            path,
            headers=headers,
            body=body,
            json=json,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def put(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        body: str | None = None,
        json: JSON = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A PUT request."""
        return self.request(
            "PUT",
            name,
            path,
            headers=headers,
            body=body,
            json=json,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )

    def patch(
        self,
        name: str,
        path: str,
        *,
        headers: Headers | None = None,
        body: str | None = None,
        json: JSON = None,
        think_time: ThinkTimeSpec | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
    ) -> StepSpec:
        """A PATCH request."""
        return self.request(
            "PATCH",
            name,
            path,
            headers=headers,
            body=body,
            json=json,
            think_time=think_time,
            extract=extract,
            checks=checks,
            on_check_failure=on_check_failure,
        )


#: HTTP steps: ``http.get(name, path, ...)``, ``http.post(name, path, json=...)``...
http = _Http()


Pick = Literal["first", "random", "all"]


class _Extract:
    """Extractors: a value of the response into a VU variable.

    ``pick``: ``"first"`` match (default), one at ``"random"``, or ``"all"`` as a list.
    ``default``: the value when nothing matches (without one, the variable is unset and the step
    counts an ``extract_failed`` error).

    >>> extract.json("building", "$.buildings[?@.can_build == true].id", pick="random").lower()
    {'var': 'building', 'from': 'json', 'expression': '$.buildings[?@.can_build == true].id', 'pick': 'random'}
    """

    def json(self, var: str, expression: str, *, pick: Pick | None = None, default: JSON = None) -> ExtractorSpec:
        """An RFC 9535 JSONPath over the response body, e.g. ``$.items[0].id``."""
        return ExtractorSpec({"var": var, "from": "json", "expression": expression, "pick": pick, "default": default})

    def regex(self, var: str, pattern: str, *, pick: Pick | None = None, default: JSON = None) -> ExtractorSpec:
        """A regular expression over the response body: its first group (or the whole match)."""
        return ExtractorSpec({"var": var, "from": "regex", "expression": pattern, "pick": pick, "default": default})

    def header(self, var: str, name: str, *, pick: Pick | None = None, default: JSON = None) -> ExtractorSpec:
        """A response header's value."""
        return ExtractorSpec({"var": var, "from": "header", "expression": name, "pick": pick, "default": default})

    def status(self, var: str) -> ExtractorSpec:
        """The response's status code."""
        return ExtractorSpec({"var": var, "from": "status"})


#: Extractors: ``extract.json(var, expression)``, ``extract.regex``, ``extract.header``, ``extract.status``.
extract = _Extract()


class _Check:
    """Checks: a response that fails one counts under error kind ``check_failed``.

    >>> check.status(200, 201).lower(), check.json("$.ok", equals=True).lower()
    ({'type': 'status', 'in': [200, 201]}, {'type': 'json', 'expression': '$.ok', 'equals': True})
    """

    def status(self, *codes: Count) -> CheckSpec:
        """The status is one of ``codes`` (this replaces the rule that a status >= 400 is an error)."""
        return CheckSpec({"type": "status", "in": list(codes)})

    def json(self, expression: str, *, equals: JSON = None) -> CheckSpec:
        """A JSONPath matches something; with ``equals``, its first match equals that value."""
        return CheckSpec({"type": "json", "expression": expression, "equals": equals})

    def body_contains(self, text: str) -> CheckSpec:
        """The body contains ``text``."""
        return CheckSpec({"type": "body_contains", "text": text})

    def body_matches(self, pattern: str) -> CheckSpec:
        """The body matches the regular expression ``pattern`` somewhere."""
        return CheckSpec({"type": "body_matches", "pattern": pattern})


#: Checks: ``check.status(200)``, ``check.json(path, equals=...)``, ``check.body_contains``, ``check.body_matches``.
check = _Check()


# --- control flow ------------------------------------------------------------------------------


def group(name: str, *steps: StepSpec) -> StepSpec:
    """Steps whose total time (think times included) is recorded under ``name``, like a step's.

    >>> group("login", http.get("form", "/login"), http.post("submit", "/login")).lower()["type"]
    'group'
    """
    return StepSpec({"type": "group", "name": name, "steps": _steps(steps)})


def parallel(name: str, *requests: StepSpec) -> StepSpec:
    """HTTP requests a VU sends at once (a page's resources, as a browser fetches them) and
    waits for; the pass is recorded under ``name`` like a group's, each request under its own.
    Only :data:`http` steps, without ``think_time``; their extractions apply when the group ends,
    in the order given.

    >>> page = parallel("page", http.get("css", "/site.css"), http.get("js", "/app.js"))
    >>> page.lower()["type"], [step["name"] for step in page.lower()["steps"]]
    ('parallel', ['css', 'js'])
    """
    return StepSpec({"type": "parallel", "name": name, "steps": _steps(requests)})


def branch(weight: Number, *steps: StepSpec) -> BranchSpec:
    """A branch of a :func:`choice`, taken ``weight`` / (sum of weights) of the time; it may have
    no steps (a weighted "do nothing")."""
    return BranchSpec({"weight": weight, "steps": _steps(steps)})


def choice(*branches: BranchSpec) -> StepSpec:
    """One of the branches per pass, drawn by weight (JMeter's throughput controller).

    >>> choice(branch(70, http.get("city", "/city")), branch(30)).lower()["branches"][1]
    {'weight': 30, 'steps': []}
    """
    return StepSpec({"type": "choice", "branches": [b.lower() for b in branches]})


@overload
def loop(*steps: StepSpec, count: Count) -> StepSpec: ...
@overload
def loop(*steps: StepSpec, while_: str, max_iterations: Count | None = None) -> StepSpec: ...
@overload
def loop(*steps: StepSpec, for_each: str, as_: str) -> StepSpec: ...
def loop(
    *steps: StepSpec,
    count: Count | None = None,
    while_: str | None = None,
    max_iterations: Count | None = None,
    for_each: str | None = None,
    as_: str | None = None,
) -> StepSpec:
    """Steps repeated ``count`` times, ``while_`` an expression holds (at most ``max_iterations``
    passes, 1000 by default), or once ``for_each`` item of a list variable, held in ``as_``.

    >>> loop(http.post("build", "/build/{{ b }}"), for_each="buildings", as_="b").lower()["as"]
    'b'
    """
    return StepSpec(
        {
            "type": "loop",
            "count": count,
            "while": while_,
            "max_iterations": max_iterations,
            "for_each": for_each,
            "as": as_,
            "steps": _steps(steps),
        }
    )


def when(condition: str, *then: StepSpec, else_: Sequence[StepSpec] = ()) -> StepSpec:
    """``then`` steps when the expression ``condition`` holds, else the ``else_`` steps (the
    plan's ``if`` step).

    >>> when("gold >= 100", http.post("buy", "/buy"), else_=[think(500)]).lower()["else"]
    [{'type': 'think', 'think_time': {'type': 'constant', 'duration_ms': 500}}]
    """
    return StepSpec({"type": "if", "condition": condition, "then": _steps(then), "else": _steps(else_)})


def think(think_time: ThinkTimeSpec | Number) -> StepSpec:
    """A pause on its own: a think time, or a number of milliseconds (a constant pause)."""
    spec = think_time if isinstance(think_time, ThinkTimeSpec) else constant(think_time)
    return StepSpec({"type": "think", "think_time": spec.lower()})


def end_iteration() -> StepSpec:
    """Ends the iteration here; the VU starts its next one."""
    return StepSpec({"type": "end_iteration"})


# --- message steps (tcp://, udp://, kcp:// targets) --------------------------------------------


class _Message:
    """Message steps against a gateway: ``message.connect(name)``, ``message.send(name, text)``,
    ``message.receive(name, match=...)``, ``message.ping(name)``, ``message.stream(name, text,
    per_second=..., duration_ms=...)``, ``message.close()``. ``{{ seq }}`` in a message is its
    number; ``hex``, ``base64`` or ``json`` may replace ``text``.

    >>> message.ping("rtt", reply_seq=r"pong (\\d+)").lower()
    {'type': 'ping', 'name': 'rtt', 'reply_seq': 'pong (\\\\d+)'}
    >>> message.stream("move", "move {{ seq }}", per_second=10, duration_ms=1000).lower()["per_second"]
    10
    """

    def connect(
        self,
        name: str,
        *,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        think_time: ThinkTimeSpec | None = None,
    ) -> StepSpec:
        """Opens the VU's connection (a new one if it had one); timed. Against a ws:// or wss://
        target it is the upgrade: ``path`` after base_url's, ``headers`` (templates)."""
        return StepSpec(
            {
                "type": "connect",
                "name": name,
                "path": path,
                "headers": dict(headers) if headers else None,
                "think_time": think_time.lower() if think_time else None,
            }
        )

    def send(
        self,
        name: str,
        text: str | None = None,
        *,
        hex: str | None = None,
        base64: str | None = None,
        json: JSON = None,
        think_time: ThinkTimeSpec | None = None,
    ) -> StepSpec:
        """Sends one message: exactly one of ``text``, ``hex``, ``base64`` or ``json``."""
        return StepSpec(
            {
                "type": "send",
                "name": name,
                "text": text,
                "hex": hex,
                "base64": base64,
                "json": json,
                "think_time": think_time.lower() if think_time else None,
            }
        )

    def receive(
        self,
        name: str,
        *,
        match: str | None = None,
        json_path: str | None = None,
        timeout_ms: Number | None = None,
        extract: Sequence[ExtractorSpec] = (),
        checks: Sequence[CheckSpec] = (),
        on_check_failure: OnCheckFailure | None = None,
        think_time: ThinkTimeSpec | None = None,
    ) -> StepSpec:
        """Waits for the first message matching ``match`` (a regular expression) and/or ``json_path``."""
        return StepSpec(
            {
                "type": "receive",
                "name": name,
                "match": match,
                "json_path": json_path,
                "timeout_ms": timeout_ms,
                "extract": [e.lower() for e in extract] or None,
                "checks": [c.lower() for c in checks] or None,
                "on_check_failure": on_check_failure,
                "think_time": think_time.lower() if think_time else None,
            }
        )

    def ping(
        self,
        name: str,
        text: str | None = None,
        *,
        reply_seq: str | None = None,
        timeout_ms: Number | None = None,
        control_frame: bool | None = None,
        think_time: ThinkTimeSpec | None = None,
    ) -> StepSpec:
        """A numbered message (``ping {{ seq }}`` by default) timed to the reply carrying its number;
        ``control_frame``: a WebSocket's ping control frame, timed to its pong."""
        return StepSpec(
            {
                "type": "ping",
                "name": name,
                "text": text,
                "reply_seq": reply_seq,
                "timeout_ms": timeout_ms,
                "control_frame": control_frame,
                "think_time": think_time.lower() if think_time else None,
            }
        )

    def stream(
        self,
        name: str,
        text: str | None = None,
        *,
        hex: str | None = None,
        base64: str | None = None,
        json: JSON = None,
        every_ms: Number | None = None,
        per_second: Number | None = None,
        duration_ms: Number,
        think_time: ThinkTimeSpec | None = None,
    ) -> StepSpec:
        """A message every ``every_ms`` (or ``per_second`` a second) for ``duration_ms``, reading meanwhile."""
        return StepSpec(
            {
                "type": "stream",
                "name": name,
                "text": text,
                "hex": hex,
                "base64": base64,
                "json": json,
                "every_ms": every_ms,
                "per_second": per_second,
                "duration_ms": duration_ms,
                "think_time": think_time.lower() if think_time else None,
            }
        )

    def close(self) -> StepSpec:
        """Closes the VU's connection; the next message step opens another."""
        return StepSpec({"type": "close"})


#: Message steps (see :class:`_Message`).
message = _Message()


# --- data, workloads, scenarios, the plan ------------------------------------------------------


def feeder(
    name: str,
    path: str,
    *,
    format: Literal["csv", "jsonl"] | None = None,
    mode: Literal["circular", "random", "unique"] | None = None,
) -> FeederSpec:
    """Rows of a CSV (with a header row) or JSONL file, as the variable ``name``
    (``{{ users.login }}``). ``format`` may be left out for a .csv, .jsonl or .ndjson path.
    ``mode``: ``"circular"`` (default: the next row each iteration), ``"random"``, or
    ``"unique"`` (each VU its own row, for its whole life). A relative ``path`` is relative to
    the plan module's folder when ``horde`` loads it."""
    return FeederSpec({"name": name, "path": path, "format": format, "mode": mode})


@overload
def stage(duration_s: Number, *, vus: Count) -> ClosedStageSpec: ...
@overload
def stage(duration_s: Number, *, rate_per_s: Number) -> OpenStageSpec: ...
def stage(
    duration_s: Number, *, vus: Count | None = None, rate_per_s: Number | None = None
) -> ClosedStageSpec | OpenStageSpec:
    """A stage: the level moves linearly to ``vus`` (closed model) or ``rate_per_s`` (open
    model) over ``duration_s`` seconds.

    >>> stage(10, vus=50), stage(30, rate_per_s=200)
    (ClosedStageSpec({'duration_s': 10, 'vus': 50}), OpenStageSpec({'duration_s': 30, 'rate_per_s': 200}))
    """
    if (vus is None) == (rate_per_s is None):
        raise TypeError("stage() takes one of vus= (closed model) or rate_per_s= (open model)")
    if vus is not None:
        return ClosedStageSpec({"duration_s": duration_s, "vus": vus})
    return OpenStageSpec({"duration_s": duration_s, "rate_per_s": rate_per_s})


def closed(stages: Sequence[ClosedStageSpec], *, start_vus: Count | None = None) -> WorkloadSpec:
    """The closed model: a number of VUs, each looping the scenario's steps."""
    return WorkloadSpec({"type": "closed", "start_vus": start_vus, "stages": [s.lower() for s in stages]})


def open_model(
    stages: Sequence[OpenStageSpec], *, max_vus: Count, start_rate_per_s: Number | None = None
) -> WorkloadSpec:
    """The open model: iterations start at an arrival rate, each on a free VU (at most
    ``max_vus`` busy; an arrival that finds none free is counted as dropped)."""
    return WorkloadSpec(
        {
            "type": "open",
            "start_rate_per_s": start_rate_per_s,
            "stages": [s.lower() for s in stages],
            "max_vus": max_vus,
        }
    )


def scenario(
    name: str,
    *,
    steps: Sequence[StepSpec],
    workload: WorkloadSpec,
    setup: Sequence[StepSpec] = (),
    teardown: Sequence[StepSpec] = (),
    weight: Number | None = None,
    headers: Headers | None = None,
    pacing_s: Number | None = None,
    feeders: Sequence[FeederSpec] = (),
    network: Mapping[str, Number] | None = None,
) -> ScenarioSpec:
    """A scenario: each VU runs ``setup`` once, then ``steps`` once per iteration, then
    ``teardown`` when it stops. ``headers`` go with each of its requests; ``pacing_s`` starts an
    iteration every that many seconds (closed model); ``weight`` is its share when ``--vus`` or
    ``--rate`` spread one level over several scenarios; ``network`` (a udp:// or kcp:// target)
    impairs its datagrams: ``{"delay_ms": 20, "loss_percent": 10}``."""
    return ScenarioSpec(
        {
            "name": name,
            "weight": weight,
            "headers": dict(headers) if headers is not None else None,
            "feeders": [f.lower() for f in feeders] or None,
            "setup": _steps(setup) or None,
            "steps": _steps(steps),
            "teardown": _steps(teardown) or None,
            "pacing_s": pacing_s,
            "workload": workload.lower(),
            "network": dict(network) if network is not None else None,
        }
    )


def plan(
    name: str = "plan",
    *,
    base_url: str,
    scenarios: Sequence[ScenarioSpec],
    parameters: Mapping[str, bool | int | float | str] | None = None,
    headers: Headers | None = None,
    connect_timeout_ms: Number | None = None,
    request_timeout_ms: Number | None = None,
    insecure: bool | Param | None = None,
    graceful_stop_s: Number | None = None,
    framing: Mapping[str, Any] | None = None,
    kcp: Mapping[str, Any] | None = None,
    http_version: Literal["1.1", "2", "auto"] | None = None,
    parallel_connections: int | Param | None = None,
) -> Plan:
    """The plan, validated: parameters substituted (``-p`` values when ``horde`` loads this
    module, then ``HORDE_PARAM_NAME``, then the defaults in ``parameters``).

    Raises :class:`~horde.errors.PlanInvalid` listing every problem, located by path
    (``scenarios[0].steps[1].path``), and :class:`~horde.errors.InvalidInput` for a parameter
    value of the wrong kind. ``framing`` (a tcp:// target) and ``kcp`` (a kcp:// target) are
    the target's, as in YAML: ``framing={"type": "length", "bytes": 2}``; so are
    ``http_version`` and ``parallel_connections`` (HTTP/1.1 connections a VU uses at once for a
    :func:`parallel` group).
    """
    target = {
        "base_url": base_url,
        "headers": dict(headers) if headers is not None else None,
        "connect_timeout_ms": connect_timeout_ms,
        "request_timeout_ms": request_timeout_ms,
        "insecure": insecure,
        "framing": dict(framing) if framing is not None else None,
        "kcp": dict(kcp) if kcp is not None else None,
        "http_version": http_version,
        "parallel_connections": parallel_connections,
    }
    data = {
        "version": 1,
        "name": name,
        "parameters": dict(parameters) if parameters is not None else None,
        "target": {key: value for key, value in target.items() if value is not None},
        "scenarios": [s.lower() for s in scenarios],
        "graceful_stop_s": graceful_stop_s,
    }
    data = {key: _plain(value) for key, value in data.items() if value is not None}
    # Before anything walks the data (a parameter's name is looked up in the environment).
    shaped = shape_problems(data)
    if shaped:
        raise PlanInvalid(
            [Problem(format_path(loc), message, hint=hint) for loc, message, hint in shaped], source=f"plan '{name}'"
        )
    declared = parameters or {}
    explicit = {key: value for key, value in current_explicit_parameters().items() if key in declared}

    try:
        return check_plan_data(apply_parameters(data, explicit))
    except PlanInvalid as error:
        raise PlanInvalid(error.problems, source=f"plan '{name}'") from None
