"""The plan: what a run does, and Horde's contract between the control plane and the engine.

These pydantic models are the single definition of the plan (version 1, described in
ARCHITECTURE.md, "The plan contract"). A plan written as YAML, JSON or Python code is checked
here, every problem at once and each located by its path (``scenarios[0].steps[1].path``); the
engine (``crates/horde-plan``) decodes the JSON of :func:`plan_to_json` and checks it again.
Every model forbids unknown keys, and wire names carry their units (``duration_ms``,
``rate_per_s``).

Building a plan in Python:

>>> from horde.plan import (
...     ClosedModel, ClosedStage, ConstantThinkTime, HttpStep, Plan, Scenario, Target,
... )
>>> plan = Plan(
...     version=1,
...     name="quickstart",
...     target=Target(base_url="http://127.0.0.1:8080"),
...     scenarios=[
...         Scenario(
...             name="browse",
...             steps=[
...                 HttpStep(name="home", method="GET", path="/",
...                          think_time=ConstantThinkTime(duration_ms=50)),
...             ],
...             workload=ClosedModel(stages=[ClosedStage(duration_s=5, vus=20)]),
...         ),
...     ],
... )
>>> wire = json.loads(plan_to_json(plan))
>>> wire["target"]["connect_timeout_ms"], wire["scenarios"][0]["workload"]["type"]
(5000.0, 'closed')

A plan from plain data (what a YAML or JSON file holds) lists every problem with a hint:

>>> try:
...     plan_from_dict({"version": 1, "target": {"base_url": "127.0.0.1:8080"}})
... except PlanInvalid as error:
...     for problem in error.problems:
...         print(f"{problem}  (hint: {problem.hint})")
target.base_url: '127.0.0.1:8080' has no http:// or https:// scheme  (hint: write the full URL, e.g. 'http://127.0.0.1:8080')
scenarios: is required but missing  (hint: add 'scenarios': the behaviours to run, each with its own workload; at least one)
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, NoReturn, Union
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from horde.errors import PlanInvalid, Problem

__all__ = [
    "METHODS",
    "ClosedModel",
    "ClosedStage",
    "ConstantThinkTime",
    "ExponentialThinkTime",
    "HttpStep",
    "OpenModel",
    "OpenStage",
    "Plan",
    "Scenario",
    "Target",
    "ThinkTime",
    "UniformThinkTime",
    "Workload",
    "plan_from_dict",
    "plan_json_schema",
    "plan_to_json",
]

#: The HTTP methods a step may use, upper case as they go on the wire.
METHODS: tuple[str, ...] = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

# Upper bounds, the same as crates/horde-plan's: far beyond any real test, low enough that no
# valid plan can overflow a duration, an allocation or a counter in the engine.
MAX_STAGE_DURATION_S = 30 * 24 * 3600.0
MAX_TIMEOUT_MS = 3_600_000.0
MAX_GRACEFUL_STOP_S = 3600.0
MAX_THINK_TIME_MS = 86_400_000.0
MAX_VUS = 10_000_000
MAX_RATE_PER_S = 10_000_000.0

# RFC 9110 token characters: what a header name may contain.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_PATH_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")

# Shared by every model: unknown keys are errors, and numbers must be finite (JSON has no NaN).
_STRICT_KEYS = ConfigDict(extra="forbid", allow_inf_nan=False)


def _type_is_required(schema: dict[str, Any]) -> None:
    # The ``type`` of a think time or workload has a default for Python code, but a file must
    # write it (it selects the model), so the schema says it is required.
    schema["required"] = ["type", *schema.get("required", [])]


# The models of a tagged union (think times, workloads): selected by their ``type`` key.
_TAGGED = ConfigDict(extra="forbid", allow_inf_nan=False, json_schema_extra=_type_is_required)


# --- errors raised by the validators ---------------------------------------------------------
#
# A validator reports through PydanticCustomError with the message and its hint in ``ctx`` so
# that describe_validation_error() can pair them. Cross-field checks raise a ValidationError whose
# line errors carry a location *relative to the model or field being validated*; pydantic
# prefixes the outer location, so a duplicate step name is reported at
# ``scenarios[0].steps[2].name`` rather than at the scenario.


def _custom(kind: str, message: str, hint: str) -> PydanticCustomError:
    # The template is a single placeholder filled from ctx: user text (a path such as '/{id}')
    # may hold braces, and "hint" comes first so that its substitution cannot touch the message.
    return PydanticCustomError(kind, "{detail}", {"hint": hint, "detail": message})


_Located = tuple[tuple[str | int, ...], Any, PydanticCustomError]


def _raise_located(title: str, errors: list[_Located]) -> NoReturn:
    details = [InitErrorDetails(type=error, loc=loc, input=value) for loc, value, error in errors]
    raise ValidationError.from_exception_data(title, details)


def _check_headers(headers: dict[str, str]) -> dict[str, str]:
    errors: list[_Located] = []
    seen: dict[str, str] = {}
    for name, value in headers.items():
        if not _TOKEN.match(name):
            errors.append(((name,), name, _custom(
                "header_name",
                f"'{name}' is not a valid header name",
                "header names are letters, digits and !#$%&'*+-.^_`|~ only, no spaces or colons, "
                "e.g. 'x-request-id'",
            )))
        elif name.lower() in seen:
            errors.append(((name,), name, _custom(
                "header_duplicate",
                f"header '{name}' is given twice (also as '{seen[name.lower()]}')",
                "header names are case-insensitive; keep one of them",
            )))
        else:
            seen[name.lower()] = name
        if "\r" in value or "\n" in value:
            errors.append(((name,), value, _custom(
                "header_value",
                "header values cannot contain line breaks",
                "write the value on one line (in YAML, avoid '|' and '>' block scalars here)",
            )))
    if errors:
        _raise_located("headers", errors)
    return headers


def _check_stages_duration(stages: list[Any]) -> None:
    total = sum(stage.duration_s for stage in stages)
    if not total > 0:
        raise _custom(
            "workload_duration",
            f"the stages last {total:g} s in total; a workload needs at least one stage",
            "add a stage, e.g. {duration_s: 10, vus: 5} (closed) or "
            "{duration_s: 10, rate_per_s: 20} (open)",
        )


# --- the models ------------------------------------------------------------------------------

_HEADERS_DESCRIPTION = (
    "HTTP headers as a mapping of name to value, e.g. {accept: application/json}"
)


class Target(BaseModel):
    """The system under test and how to reach it."""

    model_config = _STRICT_KEYS

    base_url: str = Field(
        description="http:// or https:// URL of the target: a host, an optional port and an "
        "optional path prefix joined with each step's path, e.g. 'http://127.0.0.1:8080'",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"{_HEADERS_DESCRIPTION}; sent with every request (a step's headers "
        "override them)",
    )
    connect_timeout_ms: float = Field(
        default=5000,
        gt=0,
        le=MAX_TIMEOUT_MS,
        description="how long to wait for a connection (TCP and TLS), in milliseconds; > 0",
    )
    request_timeout_ms: float = Field(
        default=30000,
        gt=0,
        le=MAX_TIMEOUT_MS,
        description="how long a whole exchange may take, from sending the request to the last "
        "byte of the response body, in milliseconds; > 0",
    )
    insecure: bool = Field(
        default=False,
        description="true turns TLS certificate verification off (self-signed test servers)",
    )

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, url: str) -> str:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            raise _custom(
                "base_url",
                f"'{url}' is not a valid URL ({error})",
                "write it as scheme://host[:port][/prefix], e.g. 'http://127.0.0.1:8080'",
            ) from None
        if parts.scheme not in ("http", "https") or not url.startswith(f"{parts.scheme}://"):
            if "://" in url:
                message = f"'{url}' uses scheme '{parts.scheme}'; only http and https are supported"
                hint = "use an http:// or https:// URL"
            else:
                message = f"'{url}' has no http:// or https:// scheme"
                hint = "write the full URL, e.g. 'http://127.0.0.1:8080'"
            raise _custom("base_url", message, hint)
        if not parts.hostname:
            raise _custom(
                "base_url",
                f"'{url}' has no host",
                "put the host after the scheme, e.g. 'http://127.0.0.1:8080'",
            )
        if port == 0:
            raise _custom("base_url", f"'{url}' has port 0", "use the port the target listens on")
        if "@" in parts.netloc:
            # The engine does not send URL credentials, and they would be stored with the run.
            raise _custom(
                "base_url",
                "base_url must not carry credentials (user:password@)",
                "send them as a header instead, e.g. headers: {Authorization: 'Basic ...'}; secret headers are redacted in the store",
            )
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise _custom(
                "base_url",
                f"'{url}' has a query or fragment",
                "keep base_url to scheme, host, port and path prefix; put query strings in each "
                "step's path",
            )
        return url

    @field_validator("headers")
    @classmethod
    def _check_header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        return _check_headers(headers)


class ConstantThinkTime(BaseModel):
    """The same pause every time."""

    model_config = _TAGGED

    type: Literal["constant"] = Field(default="constant", description="this think time: 'constant'")
    duration_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the pause, in milliseconds; >= 0")


class UniformThinkTime(BaseModel):
    """A pause drawn uniformly between min_ms and max_ms."""

    model_config = _TAGGED

    type: Literal["uniform"] = Field(default="uniform", description="this think time: 'uniform'")
    min_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the shortest pause, in milliseconds; >= 0")
    max_ms: float = Field(
        ge=0, le=MAX_THINK_TIME_MS, description="the longest pause, in milliseconds; >= 0 and >= min_ms"
    )

    @field_validator("max_ms")
    @classmethod
    def _check_range(cls, max_ms: float, info: ValidationInfo) -> float:
        min_ms = info.data.get("min_ms")
        if min_ms is not None and max_ms < min_ms:
            raise _custom(
                "uniform_range",
                f"max_ms ({max_ms:g}) is less than min_ms ({min_ms:g})",
                "make max_ms at least min_ms, or swap the two",
            )
        return max_ms


class ExponentialThinkTime(BaseModel):
    """A pause drawn from an exponential distribution (a Poisson process of user actions)."""

    model_config = _TAGGED

    type: Literal["exponential"] = Field(
        default="exponential", description="this think time: 'exponential'"
    )
    mean_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the mean pause, in milliseconds; >= 0")


ThinkTime = Annotated[
    Union[ConstantThinkTime, UniformThinkTime, ExponentialThinkTime],
    Field(discriminator="type"),
]


class HttpStep(BaseModel):
    """One HTTP request of a scenario."""

    model_config = _STRICT_KEYS

    name: str = Field(
        min_length=1,
        description="the step's name, unique in its scenario; results are reported under it",
    )
    method: Method = Field(description="the HTTP method, upper case: " + ", ".join(METHODS))
    path: str = Field(
        description="the request path, starting with '/', joined to target.base_url, "
        "e.g. '/login' or '/items?page=2'",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"{_HEADERS_DESCRIPTION}; override the target's headers of the same name",
    )
    body: str | None = Field(default=None, description="the request body as text, or null")
    think_time: ThinkTime | None = Field(
        default=None,
        description="the pause after this step, before the next: "
        "{type: constant, duration_ms}, {type: uniform, min_ms, max_ms} or "
        "{type: exponential, mean_ms}; none by default",
    )

    @field_validator("method", mode="before")
    @classmethod
    def _check_method(cls, method: Any) -> Any:
        if isinstance(method, str) and method not in METHODS:
            if method.upper() in METHODS:
                raise _custom(
                    "method_case",
                    f"method '{method}' must be upper case",
                    f"write '{method.upper()}'",
                )
            raise _custom(
                "method",
                f"'{method}' is not a method Horde sends",
                "use one of: " + ", ".join(METHODS),
            )
        return method

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str) -> str:
        if not path.startswith("/"):
            if "://" in path:
                hint = "put the scheme and host in target.base_url and only the path here, e.g. '/login'"
            else:
                hint = f"write the path relative to target.base_url, e.g. '/{path.lstrip('./')}'"
            raise _custom("path", f"'{path}' must start with '/'", hint)
        if _PATH_FORBIDDEN.search(path):
            raise _custom(
                "path_characters",
                f"'{path}' contains spaces or control characters",
                "percent-encode them, e.g. a space as %20",
            )
        return path

    @field_validator("headers")
    @classmethod
    def _check_header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        return _check_headers(headers)


class ClosedStage(BaseModel):
    """Moves the VU count linearly from the previous level to 'vus' over 'duration_s'."""

    model_config = _STRICT_KEYS

    duration_s: float = Field(gt=0, le=MAX_STAGE_DURATION_S, description="how long the stage lasts, in seconds; > 0")
    vus: int = Field(ge=0, le=MAX_VUS, description="the VU count reached at the end of the stage; >= 0")


class OpenStage(BaseModel):
    """Moves the arrival rate linearly from the previous rate to 'rate_per_s' over 'duration_s'."""

    model_config = _STRICT_KEYS

    duration_s: float = Field(gt=0, le=MAX_STAGE_DURATION_S, description="how long the stage lasts, in seconds; > 0")
    rate_per_s: float = Field(
        ge=0, le=MAX_RATE_PER_S, description="the arrival rate reached at the end of the stage, per second; >= 0"
    )


class ClosedModel(BaseModel):
    """A number of VUs, each looping the scenario's steps until the stages end."""

    model_config = _TAGGED

    type: Literal["closed"] = Field(default="closed", description="this workload model: 'closed'")
    start_vus: int = Field(default=0, ge=0, le=MAX_VUS, description="the VU count the first stage starts from; >= 0")
    stages: list[ClosedStage] = Field(
        json_schema_extra={"minItems": 1},
        description="the load profile: each stage moves the VU count linearly to its 'vus' over "
        "its 'duration_s', e.g. [{duration_s: 5, vus: 20}, {duration_s: 15, vus: 20}]",
    )

    @field_validator("stages")
    @classmethod
    def _check_duration(cls, stages: list[ClosedStage]) -> list[ClosedStage]:
        _check_stages_duration(stages)
        return stages


class OpenModel(BaseModel):
    """Arrivals at a rate; each arrival runs one iteration on a free VU."""

    model_config = _TAGGED

    type: Literal["open"] = Field(default="open", description="this workload model: 'open'")
    start_rate_per_s: float = Field(
        default=0, ge=0, le=MAX_RATE_PER_S, description="the arrival rate the first stage starts from, per second; >= 0"
    )
    stages: list[OpenStage] = Field(
        json_schema_extra={"minItems": 1},
        description="the load profile: each stage moves the arrival rate linearly to its "
        "'rate_per_s' over its 'duration_s', e.g. [{duration_s: 10, rate_per_s: 50}]",
    )
    max_vus: int = Field(
        ge=1,
        le=MAX_VUS,
        description="the most VUs that may be busy at once; an arrival that finds them all busy "
        "is counted as dropped, never queued; >= 1",
    )

    @field_validator("stages")
    @classmethod
    def _check_duration(cls, stages: list[OpenStage]) -> list[OpenStage]:
        _check_stages_duration(stages)
        return stages


Workload = Annotated[Union[ClosedModel, OpenModel], Field(discriminator="type")]


def _name_of(item: Any) -> str | None:
    name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
    return name if isinstance(name, str) else None


def _duplicate_names(items: Any, what: str) -> list[_Located]:
    errors: list[_Located] = []
    if not isinstance(items, list):
        return errors
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        name = _name_of(item)
        if name is None:
            continue
        if name in first_index:
            errors.append(((index, "name"), name, _custom(
                "duplicate_name",
                f"duplicate {what} name '{name}' (also at index {first_index[name]})",
                f"give each {what} its own name; results are reported by {what} name",
            )))
        else:
            first_index[name] = index
    return errors


def _reraisable(line: ErrorDetails) -> InitErrorDetails:
    ctx = line.get("ctx")
    if ctx is not None and "detail" in ctx and "hint" in ctx:
        kind = PydanticCustomError(line["type"], "{detail}", {"hint": ctx["hint"], "detail": ctx["detail"]})
        return InitErrorDetails(type=kind, loc=line["loc"], input=line["input"])
    details = InitErrorDetails(type=line["type"], loc=line["loc"], input=line["input"])
    if ctx is not None:
        details["ctx"] = ctx
    return details


def _validate_unique_names(items: Any, handler: ValidatorFunctionWrapHandler, what: str) -> Any:
    """Validates a list of named things; duplicate names are reported even when items are bad.

    The names are read from the input before validation, so a duplicate is listed together with
    the other problems of the list rather than only once those are fixed.
    """
    duplicates = _duplicate_names(items, what)
    try:
        validated = handler(items)
    except ValidationError as error:
        if not duplicates:
            raise
        lines = [_reraisable(line) for line in error.errors()]
        lines += [InitErrorDetails(type=kind, loc=loc, input=value) for loc, value, kind in duplicates]
        raise ValidationError.from_exception_data(error.title, lines) from None
    if duplicates:
        _raise_located(what, duplicates)
    return validated


class Scenario(BaseModel):
    """One behaviour: its steps, run in order by its own VUs under its own workload model."""

    model_config = _STRICT_KEYS

    name: str = Field(min_length=1, description="the scenario's name, unique in the plan")
    steps: list[HttpStep] = Field(
        min_length=1, description="the requests each iteration makes, in order; at least one"
    )
    workload: Workload = Field(
        description="how load is applied: {type: closed, stages: [...]} for a number of VUs, or "
        "{type: open, stages: [...], max_vus} for an arrival rate",
    )

    @field_validator("steps", mode="wrap")
    @classmethod
    def _check_step_names(cls, steps: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _validate_unique_names(steps, handler, "step")


class Plan(BaseModel):
    """A whole plan: where the target is, and the scenarios to run against it (version 1)."""

    # No title here: pydantic names its errors after the model's title, and
    # describe_validation_error() finds the model by that name. plan_json_schema() adds one.
    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={"$comment": "generated from python/horde/plan.py; do not edit"},
    )

    version: Literal[1] = Field(description="the plan format version; must be 1")
    name: str = Field(
        default="plan", min_length=1, description="the plan's name, shown in results"
    )
    target: Target = Field(description="the system under test: base_url, headers, timeouts")
    scenarios: list[Scenario] = Field(
        min_length=1,
        description="the behaviours to run, each with its own workload; at least one",
    )
    graceful_stop_s: float = Field(
        default=5,
        ge=0,
        le=MAX_GRACEFUL_STOP_S,
        description="after the stages end or a stop is asked, how long in-flight iterations may "
        "run on before they are cut, in seconds; >= 0",
    )

    @field_validator("scenarios", mode="wrap")
    @classmethod
    def _check_scenario_names(cls, scenarios: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _validate_unique_names(scenarios, handler, "scenario")


# --- the public functions --------------------------------------------------------------------


def plan_from_dict(data: Any, *, source: str | None = None) -> Plan:
    """Validates plain data (what a YAML or JSON file holds) into a :class:`Plan`.

    Raises :class:`~horde.errors.PlanInvalid` listing every problem found, each located by its
    path (``scenarios[0].steps[1].path``) and with a hint. ``source`` names where the data came
    from in the error's message.
    """
    # Imported here: plan_problems describes errors in terms of these models, so it imports them.
    from horde.plan_problems import describe_validation_error, input_order

    try:
        return Plan.model_validate(data)
    except ValidationError as error:
        issues = sorted(describe_validation_error(error), key=lambda i: input_order(data, i.loc))
        problems = [Problem(location=i.path, message=i.message, hint=i.hint) for i in issues]
        raise PlanInvalid(problems, source=source) from None




def plan_to_json(plan: Plan) -> str:
    """The canonical JSON of a plan, as sent to the engine and stored with a run.

    Every default is written out, so the JSON says exactly what ran.
    """
    return json.dumps(plan.model_dump(mode="json"), separators=(",", ":"))


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of the plan (what ``horde schema`` prints), for editors and validators."""
    schema = Plan.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "Horde plan (version 1)",
    }
