"""The plan: what a run does, and Horde's contract between the control plane and the engine.

These pydantic models are the single definition of the plan (version 1, described in
ARCHITECTURE.md, "The plan contract"). A plan written as YAML, JSON or Python code is checked
here, every problem at once and each located by its path (``scenarios[0].steps[1].path``); the
engine (``crates/horde-plan``) decodes the JSON of :func:`plan_to_json` and checks it again.
Every model forbids unknown keys, and wire names carry their units (``duration_ms``,
``rate_per_s``). Where a wire name is a Python keyword the attribute ends with ``_`` (``from_``,
``while_``, ``as_``, ``else_``, ``in_``, and ``json_``); dumps use the wire names.

The models live in six modules, all exported here: :mod:`horde.plan.common` (shared rules,
upper bounds, think times), :mod:`horde.plan.steps` (the steps of the scenario language),
:mod:`horde.plan.workloads` (closed and open models, stages and compact profiles),
:mod:`horde.plan.control` (thresholds, autostop, steering), :mod:`horde.plan.target` (the
target and how VUs reach it) and this one (feeders, scenario, plan). Parameters (``{{ params.NAME }}``) are
substituted before validation by :mod:`horde.plan.loader` and :func:`horde.plan.builder.plan`, which is
also the easier way to write a plan in Python. With the models themselves:

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

>>> from horde.errors import PlanInvalid
>>> from horde.plan.problems import plan_from_dict
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
import math
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from horde.plan.common import (
    MAX_GRACEFUL_STOP_S,
    MAX_PACING_S,
    MAX_STEP_DEPTH,
    MAX_WEIGHT,
    STRICT_KEYS,
    Located,
    custom,
    is_identifier,
    kind_of,
    raise_located,
    with_problems,
)
from horde.plan.control import AutostopRule, Generators, Steer, Threshold, check_control_names
from horde.plan.message import Network
from horde.plan.monitors import Monitor, check_monitor_names
from horde.plan.parameters import ParameterValue
from horde.plan.steps import AnyStep, Step, iter_steps
from horde.plan.target import HEADERS_DESCRIPTION as _HEADERS_DESCRIPTION
from horde.plan.target import Target
from horde.plan.build_rules import check_variable_name, scenario_structure_problems
from horde.plan.workloads import Workload

__all__ = ["Feeder", "Plan", "Scenario", "plan_json_schema", "plan_to_json"]


# --- the models ------------------------------------------------------------------------------


#: Feeder formats by file extension, for a feeder that does not say its format.
FEEDER_FORMATS_BY_SUFFIX: dict[str, str] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _format_may_be_left_out(schema: dict[str, Any]) -> None:
    schema["required"] = [key for key in schema.get("required", []) if key != "format"]


class Feeder(BaseModel):
    """Rows of test data (CSV or JSONL) handed to a scenario's VUs, one row at a time."""

    model_config = ConfigDict(
        extra="forbid", allow_inf_nan=False, serialize_by_alias=True, json_schema_extra=_format_may_be_left_out
    )

    name: str = Field(
        description="the variable that holds the current row, e.g. 'users': templates read {{ users.login }}",
    )
    path: str = Field(
        min_length=1,
        description="the data file, relative to the plan file's folder, e.g. 'users.csv'",
    )
    format: Literal["csv", "jsonl"] = Field(
        description="'csv' (a header row names the fields) or 'jsonl' (one JSON object a line); "
        "may be left out when the path ends in .csv, .jsonl or .ndjson",
    )
    mode: Literal["circular", "random", "unique"] = Field(
        default="circular",
        description="'circular' (default): each iteration takes the next row, from the top again "
        "at the end; 'random': a random row per iteration; 'unique': each VU takes its own row "
        "for its whole life (no more VUs than rows)",
    )

    @model_validator(mode="before")
    @classmethod
    def _infer_format(cls, data: Any) -> Any:
        if isinstance(data, dict) and "format" not in data and isinstance(data.get("path"), str):
            suffix = "." + data["path"].rsplit(".", 1)[-1].lower() if "." in data["path"] else ""
            if suffix in FEEDER_FORMATS_BY_SUFFIX:
                return {**data, "format": FEEDER_FORMATS_BY_SUFFIX[suffix]}
        return data

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        return check_variable_name(name, "feeder name")


_STEPS_DESCRIPTION = (
    "HTTP requests ({name, method, path, ...}) or control flow ({type: group|choice|loop|if|think|end_iteration, ...})"
)


class Scenario(BaseModel):
    """One behaviour: its steps, run by its own VUs under its own workload model."""

    model_config = STRICT_KEYS

    name: str = Field(min_length=1, description="the scenario's name, unique in the plan")
    weight: float = Field(
        default=1,
        gt=0,
        le=MAX_WEIGHT,
        description="the scenario's share when --vus or --rate spread one load level over several "
        "scenarios; default 1, > 0",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"{_HEADERS_DESCRIPTION}; sent with this scenario's requests (over the "
        "target's headers, under a step's); values are templates",
    )
    feeders: list[Feeder] = Field(
        default_factory=list,
        description="test data files: [{name, path, format: csv|jsonl, mode: circular|random|unique}]",
    )
    setup: list[Step] = Field(
        default_factory=list,
        description=f"steps each VU runs once before its first iteration (register, login): {_STEPS_DESCRIPTION}",
    )
    steps: list[Step] = Field(
        min_length=1,
        description=f"the behaviour each iteration runs, in order: {_STEPS_DESCRIPTION}; at least one",
    )
    teardown: list[Step] = Field(
        default_factory=list,
        description=f"steps each VU runs once when it stops (not when cut by the grace period): {_STEPS_DESCRIPTION}",
    )
    pacing_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_PACING_S,
        description="closed model: start an iteration every this many seconds whatever the "
        "responses took (device profiles); an iteration that takes longer starts the next at once",
    )
    workload: Workload = Field(
        description="how load is applied: {type: closed, stages: [...]} for a number of VUs, or "
        "{type: open, stages: [...], max_vus} for an arrival rate",
    )
    network: Network | None = Field(
        default=None,
        description="a udp:// or kcp:// target: the impaired network the engine puts this scenario's datagrams "
        "through, each way: {delay_ms, jitter_ms, loss_percent, duplicate_percent, reorder_percent, rate_limit, seed}",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _check_structure(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        problems = scenario_structure_problems(data)
        return with_problems(data, handler, problems, "Scenario", tuple(cls.model_fields))

    def all_steps(self) -> Iterator[AnyStep]:
        """Every step of setup, steps and teardown, at any depth, depth first."""
        yield from iter_steps([*self.setup, *self.steps, *self.teardown])


class Plan(BaseModel):
    """A whole plan: where the target is, and the scenarios to run against it (version 1)."""

    # No title here: pydantic names its errors after the model's title, and
    # describe_validation_error() finds the model by that name. plan_json_schema() adds one.
    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        serialize_by_alias=True,
        json_schema_extra={"$comment": "generated from python/horde/plan.py; do not edit"},
    )

    version: Literal[1] = Field(description="the plan format version; must be 1")
    name: str = Field(default="plan", min_length=1, description="the plan's name, shown in results")
    parameters: dict[str, ParameterValue] = Field(
        default_factory=dict,
        description="plan parameters and their defaults, e.g. {vus: 100, duration_s: 60}; any "
        "string of the plan may use '{{ params.NAME }}'; set them with -p NAME=VALUE or "
        "HORDE_PARAM_NAME",
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
    thresholds: list[Threshold] = Field(
        default_factory=list,
        description="pass/fail conditions judged on the whole run, e.g. ['p95 < 200ms', 'errors < 1%', "
        "{condition: 'p99 < 500ms', step: login}]; a failed one ends the command with exit code 4",
    )
    autostop: list[AutostopRule] = Field(
        default_factory=list,
        description="stop the run early when a condition holds over a sliding window, e.g. "
        "[{when: 'p95 > 1s', window_s: 10}, {when: 'errors > 5%'}, no_success]",
    )
    steer: Steer | None = Field(
        default=None,
        description="move the load level while the run goes: {type: find_max, start, step, "
        "step_duration_s} or {type: target_response_time, target_ms, start}",
    )
    generators: Generators | None = Field(
        default=None,
        description="a run over several generators (horde run --cluster): {count, capacity_rps, "
        "expected_rps, workers, on_lost: continue|stop}",
    )
    monitors: list[Monitor] = Field(
        default_factory=list,
        description="what to watch on the target's side while the run goes, each on the run's time axis: "
        "[{name, type: host}, {name, type: prometheus, url, series, node_exporter}, {name, type: postgres, dsn, "
        "password_env}]",
    )

    @field_validator("monitors", mode="wrap")
    @classmethod
    def _check_monitor_names(cls, monitors: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return check_monitor_names(monitors, handler)

    @field_validator("parameters", mode="before")
    @classmethod
    def _check_parameters(cls, parameters: Any) -> Any:
        if not isinstance(parameters, dict):
            return parameters  # pydantic says it must be a mapping
        errors: list[Located] = []
        seen: dict[str, str] = {}
        for name, value in parameters.items():
            name = str(name)
            if not isinstance(value, (bool, int, float, str)) or (
                isinstance(value, float) and not math.isfinite(value)
            ):
                errors.append(
                    (
                        (name,),
                        value,
                        custom(
                            "parameter_value",
                            f"parameter '{name}' must be a number, text or true/false (got {kind_of(value)})",
                            "give its default value, e.g. vus: 100, build: 'local', insecure: false",
                        ),
                    )
                )
            if not is_identifier(name):
                errors.append(
                    (
                        (name,),
                        name,
                        custom(
                            "parameter_name",
                            f"'{name}' is not a valid parameter name",
                            "use letters, digits and '_', not starting with a digit, e.g. 'target_response_ms'",
                        ),
                    )
                )
            elif name.upper() in seen:
                errors.append(
                    (
                        (name,),
                        name,
                        custom(
                            "parameter_duplicate",
                            f"parameter '{name}' differs from '{seen[name.upper()]}' only in case",
                            f"both would be set by HORDE_PARAM_{name.upper()}; rename one",
                        ),
                    )
                )
            else:
                seen[name.upper()] = name
        if errors:
            raise_located("parameters", errors)
        return parameters

    @model_validator(mode="after")
    def _check_control_names(self) -> Plan:
        check_control_names(self)
        return self


# --- the public functions --------------------------------------------------------------------


def plan_to_json(plan: Plan) -> str:
    """The canonical JSON of a plan, as sent to the engine and stored with a run.

    Every default is written out, under its wire name (``from``, ``while``, ``as``, ``else``,
    ``in``, ``json``), so the JSON says exactly what ran.
    """
    return json.dumps(plan.model_dump(mode="json", by_alias=True), separators=(",", ":"))


#: The JSON Schema of a whole-string parameter reference, accepted wherever a plan file may
#: write a number, a boolean or a fixed word: the loader substitutes it before validation.
PARAMETER_REFERENCE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^\s*\{\{\s*params\.[A-Za-z_][A-Za-z0-9_]*\s*\}\}\s*$",
}

_SCALAR_TYPES = ("number", "integer", "boolean")


def _parameterisable(prop: dict[str, Any]) -> bool:
    if prop.get("type") in _SCALAR_TYPES or "enum" in prop:
        return True
    return any(_parameterisable(option) for option in prop.get("anyOf", []) if isinstance(option, dict))


def _inline_any_json(schema: dict[str, Any]) -> None:
    # A JSON body, an extractor's default, a check's expected value: any JSON value, written {}.
    definitions = schema.get("$defs", {})
    if definitions.pop("JsonValue", None) is None:
        return
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("$ref") == "#/$defs/JsonValue":
                del node["$ref"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of the plan (what ``horde schema`` prints), for editors and validators.

    It describes a plan *file*: a number, boolean or fixed word may also be written as
    ``"{{ params.NAME }}"``.
    """
    schema = Plan.model_json_schema(by_alias=True)
    _inline_any_json(schema)
    for definition in [schema, *schema.get("$defs", {}).values()]:
        for key, prop in definition.get("properties", {}).items():
            if key == "type" or not _parameterisable(prop):
                continue
            inner = {k: v for k, v in prop.items() if k not in ("description", "default", "title")}
            outer = {k: v for k, v in prop.items() if k in ("description", "default", "title")}
            definition["properties"][key] = {**outer, "anyOf": [inner, PARAMETER_REFERENCE_SCHEMA]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": "Horde plan (version 1)",
    }
