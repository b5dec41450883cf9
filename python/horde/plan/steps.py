"""The steps of a scenario: HTTP requests and the control flow around them.

A step is a mapping whose ``type`` selects its model; without ``type`` it is an HTTP request (so
the first slice's steps are unchanged). Control-flow steps hold steps of their own:

- ``http`` (:class:`HttpStep`): one request, with its :class:`Extractor` list and checks;
- ``group`` (:class:`GroupStep`): named steps whose total time is recorded like a step's;
- ``parallel`` (:class:`ParallelStep`): named HTTP requests a VU sends at once (as a browser
  fetches a page's resources), timed like a group;
- ``choice`` (:class:`ChoiceStep`): one :class:`Branch` per pass, drawn by weight;
- ``loop`` (:class:`LoopStep`): ``count`` times, ``while`` a condition holds, or ``for_each``
  item of a list variable;
- ``if`` (:class:`IfStep`): ``then`` or ``else`` steps by a condition;
- ``think`` (:class:`ThinkStep`) and ``end_iteration`` (:class:`EndIterationStep`).

Import them from :mod:`horde.plan`. Template, JSONPath and regex *syntax*, and variables no step
can set, are checked by the engine (``horde._engine.validate_plan``); these models check shape.

>>> from horde.plan import plan_step
>>> step = plan_step({"type": "choice", "branches": [
...     {"weight": 70, "steps": [{"name": "city", "method": "GET", "path": "/city"}]},
...     {"weight": 30, "steps": []}]})
>>> type(step).__name__, type(step.branches[0].steps[0]).__name__
('ChoiceStep', 'HttpStep')
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_validator,
)


from horde.plan.sql import SqlStep
from horde.plan.message import CloseStep, ConnectStep, PingStep, ReceiveStep, SendStep, StreamStep
from horde.plan.rules import BodyContainsCheck, BodyMatchesCheck, Check, Extractor, JsonCheck, StatusCheck

from horde.plan.build_rules import METHODS, check_method
from horde.plan.common import (
    MAX_LOOP_COUNT,
    MAX_LOOP_ITERATIONS,
    MAX_WEIGHT,
    STRICT_KEYS,
    TAGGED,
    THINK_TIME_DESCRIPTION,
    Method,
    ThinkTime,
    check_json_value,
)

__all__ = [
    "STEP_TYPES",
    "AnyStep",
    "BodyContainsCheck",
    "BodyMatchesCheck",
    "Branch",
    "Check",
    "ChoiceStep",
    "EndIterationStep",
    "Extractor",
    "GroupStep",
    "HttpStep",
    "IfStep",
    "JsonCheck",
    "LoopStep",
    "ParallelStep",
    "StatusCheck",
    "Step",
    "ThinkStep",
    "iter_steps",
    "plan_step",
]

#: The step types, as written in ``type``; ``http`` is the default.
STEP_TYPES: tuple[str, ...] = (
    "http",
    "sql",
    "connect",
    "send",
    "receive",
    "ping",
    "stream",
    "close",
    "group",
    "parallel",
    "choice",
    "loop",
    "if",
    "think",
    "end_iteration",
)


_HEADERS_DESCRIPTION = "HTTP headers as a mapping of name to value, e.g. {accept: application/json}"
_STEPS_DESCRIPTION = (
    "steps: HTTP requests ({name, method, path, ...}) or control flow "
    "({type: group|choice|loop|if|think|end_iteration, ...}); against a tcp:// or udp:// target, "
    "message steps ({type: connect|send|receive|ping|stream|close, ...})"
)


# --- the steps -------------------------------------------------------------------------------


class HttpStep(BaseModel):
    """One HTTP request of a scenario."""

    model_config = STRICT_KEYS

    type: Literal["http"] = Field(default="http", description="this step: 'http' (the default, may be left out)")
    name: str = Field(
        min_length=1,
        description="the step's name, unique in its scenario; results are reported under it",
    )
    method: Method = Field(description="the HTTP method, upper case: " + ", ".join(METHODS))
    path: str = Field(
        description="the request path, starting with '/', joined to target.base_url, "
        "e.g. '/login' or '/items/{{ item_id }}?page=2' (a template)",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description=f"{_HEADERS_DESCRIPTION}; values are templates; override the scenario's and "
        "the target's headers of the same name",
    )
    body: str | None = Field(default=None, description="the request body as text (a template), or null")
    json_: Any = Field(
        default=None,
        alias="json",
        description="a JSON body instead of 'body' (its strings are templates); sent with "
        "Content-Type: application/json",
    )
    think_time: ThinkTime | None = Field(
        default=None,
        description=f"the pause after this step, before the next: {THINK_TIME_DESCRIPTION}; none by default",
    )
    extract: list[Extractor] = Field(
        default_factory=list,
        description="values to take from the response into variables: "
        "[{var, from: json|regex|header|status, expression, pick, default}]",
    )
    checks: list[Check] = Field(
        default_factory=list,
        description="conditions the response must meet, else the request counts as check_failed: "
        "{type: status, in: [...]}, {type: json, expression, equals}, {type: body_contains, text}, "
        "{type: body_matches, pattern}",
    )
    on_check_failure: Literal["continue", "end_iteration"] = Field(
        default="continue",
        description="what a failed check does next: 'continue' (default) or 'end_iteration'",
    )

    @field_validator("method", mode="before")
    @classmethod
    def _check_method(cls, method: Any) -> Any:
        return check_method(method) if isinstance(method, str) else method

    @field_validator("json_")
    @classmethod
    def _check_json(cls, value: Any) -> Any:
        return check_json_value(value)


class GroupStep(BaseModel):
    """Steps whose total time (think times included) is recorded under the group's name."""

    model_config = TAGGED

    type: Literal["group"] = Field(default="group", description="this step: 'group'")
    name: str = Field(
        min_length=1,
        description="the group's name, unique in its scenario among step and group names; its "
        "time is reported under it",
    )
    steps: list[Step] = Field(min_length=1, description=f"the group's {_STEPS_DESCRIPTION}; at least one")


class ParallelStep(BaseModel):
    """HTTP requests a VU sends at once, as a browser fetches a page's resources, then waits for
    all; the pass (first send to last response) is recorded under the group's name.

    Over HTTP/2 the requests are streams of the VU's connection (or the pool's); over HTTP/1.1
    they go out on up to ``target.parallel_connections`` connections of the VU. Each request
    keeps its own results; what responses set (extracted variables, cookies) is applied when the
    group ends, in step order (the later step wins). Its steps are ``http`` steps without think
    times: nothing in the group comes after anything else.

    What a group may hold is horde-plan's rule, told when a plan is read:

    >>> from horde.errors import PlanInvalid
    >>> from horde.plan import plan_from_dict
    >>> try:
    ...     plan_from_dict({"version": 1, "target": {"base_url": "http://127.0.0.1:8080"}, "scenarios": [
    ...         {"name": "s", "workload": {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
    ...          "steps": [{"type": "parallel", "name": "page", "steps": [
    ...              {"name": "css", "method": "GET", "path": "/site.css"},
    ...              {"type": "think", "think_time": {"type": "constant", "duration_ms": 5}}]}]}]})
    ... except PlanInvalid as refused:
    ...     [(problem.location, problem.hint) for problem in refused.problems]
    [('scenarios[0].steps[0].steps[1].type', 'move the think step out of the group')]
    """

    model_config = TAGGED

    type: Literal["parallel"] = Field(default="parallel", description="this step: 'parallel'")
    name: str = Field(
        min_length=1,
        description="the group's name, unique in its scenario among step and group names; each "
        "pass's time (first send to last response) is reported under it",
    )
    steps: list[Step] = Field(
        min_length=1,
        description="the HTTP requests ({name, method, path, ...}) sent at once; at least one, "
        "http steps only, without think_time",
    )


class Branch(BaseModel):
    """One branch of a choice: its weight and its steps."""

    model_config = STRICT_KEYS

    weight: float = Field(
        gt=0,
        le=MAX_WEIGHT,
        description="the branch's share: it runs weight / (sum of weights) of the passes; > 0, e.g. 70",
    )
    steps: list[Step] = Field(description=f"the branch's {_STEPS_DESCRIPTION}; may be empty (a weighted 'do nothing')")


class ChoiceStep(BaseModel):
    """One branch per pass, drawn by weight (JMeter's throughput controller)."""

    model_config = TAGGED

    type: Literal["choice"] = Field(default="choice", description="this step: 'choice'")
    branches: list[Branch] = Field(
        min_length=1,
        description="the branches: [{weight: 70, steps: [...]}, {weight: 30, steps: [...]}]; at least one",
    )


class LoopStep(BaseModel):
    """Steps repeated: ``count`` times, ``while`` a condition holds, or ``for_each`` item of a list."""

    model_config = TAGGED

    type: Literal["loop"] = Field(default="loop", description="this step: 'loop'")
    count: int | None = Field(
        default=None, ge=0, le=MAX_LOOP_COUNT, description="repeat this many times (one of count, while, for_each)"
    )
    while_: str | None = Field(
        default=None,
        alias="while",
        min_length=1,
        description="repeat while this expression is true, checked before each pass, e.g. "
        "'gold >= 100' (one of count, while, for_each)",
    )
    max_iterations: int = Field(
        default=1000,
        ge=1,
        le=MAX_LOOP_ITERATIONS,
        description="a while loop ends after this many passes even if its condition still holds; default 1000",
    )
    for_each: str | None = Field(
        default=None,
        min_length=1,
        description="repeat once for each item of this list variable, e.g. 'buildings' (one of "
        "count, while, for_each); the item is the variable named by 'as'",
    )
    as_: str | None = Field(
        default=None,
        alias="as",
        description="with for_each: the variable that holds the current item, e.g. 'building'",
    )
    steps: list[Step] = Field(min_length=1, description=f"the loop's {_STEPS_DESCRIPTION}; at least one")


class IfStep(BaseModel):
    """``then`` steps when a condition holds, else ``else`` steps."""

    model_config = TAGGED

    type: Literal["if"] = Field(default="if", description="this step: 'if'")
    condition: str = Field(
        min_length=1,
        description="an expression over the VU's variables, e.g. 'building is defined' or 'gold >= 100'",
    )
    then: list[Step] = Field(
        default_factory=list, description=f"the {_STEPS_DESCRIPTION} run when the condition holds (default none)"
    )
    else_: list[Step] = Field(
        default_factory=list,
        alias="else",
        description=f"the {_STEPS_DESCRIPTION} run when it does not (default none)",
    )


class ThinkStep(BaseModel):
    """A pause on its own."""

    model_config = TAGGED

    type: Literal["think"] = Field(default="think", description="this step: 'think'")
    think_time: ThinkTime = Field(description=f"the pause: {THINK_TIME_DESCRIPTION}")


class EndIterationStep(BaseModel):
    """Ends the iteration here (the VU starts its next one)."""

    model_config = TAGGED

    type: Literal["end_iteration"] = Field(default="end_iteration", description="this step: 'end_iteration'")


_HTTP_KEYS = frozenset(field.alias or name for name, field in HttpStep.model_fields.items())


def _step_type(value: Any) -> Any:
    """The tag of a step: its ``type``; ``http`` when it has none.

    A mapping without ``type`` whose keys are not an HTTP step's (``branches``, ``count``...) gets
    no tag, so the error says that its ``type`` is missing rather than listing an HTTP step's
    missing keys.
    """
    if isinstance(value, dict):
        if "type" in value:
            tag = value["type"]
            return tag if isinstance(tag, str) else repr(tag)
        if "method" not in value and "path" not in value and not set(map(str, value)) <= _HTTP_KEYS:
            return None
        return "http"
    return getattr(value, "type", "http")


Step = Annotated[
    Union[
        Annotated[HttpStep, Tag("http")],
        Annotated[SqlStep, Tag("sql")],
        Annotated[ConnectStep, Tag("connect")],
        Annotated[SendStep, Tag("send")],
        Annotated[ReceiveStep, Tag("receive")],
        Annotated[PingStep, Tag("ping")],
        Annotated[StreamStep, Tag("stream")],
        Annotated[CloseStep, Tag("close")],
        Annotated[GroupStep, Tag("group")],
        Annotated[ParallelStep, Tag("parallel")],
        Annotated[ChoiceStep, Tag("choice")],
        Annotated[LoopStep, Tag("loop")],
        Annotated[IfStep, Tag("if")],
        Annotated[ThinkStep, Tag("think")],
        Annotated[EndIterationStep, Tag("end_iteration")],
    ],
    Discriminator(_step_type),
]

for _model in (GroupStep, ParallelStep, Branch, ChoiceStep, LoopStep, IfStep):
    _model.model_rebuild()

_STEP_ADAPTER: TypeAdapter[Any] = TypeAdapter(Step)
_STEP_MODELS: dict[str, type[AnyStep]] = {
    "http": HttpStep,
    "sql": SqlStep,
    "connect": ConnectStep,
    "send": SendStep,
    "receive": ReceiveStep,
    "ping": PingStep,
    "stream": StreamStep,
    "close": CloseStep,
    "group": GroupStep,
    "parallel": ParallelStep,
    "choice": ChoiceStep,
    "loop": LoopStep,
    "if": IfStep,
    "think": ThinkStep,
    "end_iteration": EndIterationStep,
}


def plan_step(data: Any) -> AnyStep:
    """Validates one step from plain data (its ``type`` picks the model; none is ``http``).

    The ValidationError of a bad step is named after the step's model and located in the step,
    so :func:`horde.plan.problems.describe_validation_error` explains it.
    """
    model = _STEP_MODELS.get(_step_type(data)) if isinstance(data, dict) else None
    if model is not None:
        return model.model_validate(data)
    step: AnyStep = _STEP_ADAPTER.validate_python(data)
    return step


AnyStep = Union[
    HttpStep,
    SqlStep,
    ConnectStep,
    SendStep,
    ReceiveStep,
    PingStep,
    StreamStep,
    CloseStep,
    GroupStep,
    ParallelStep,
    ChoiceStep,
    LoopStep,
    IfStep,
    ThinkStep,
    EndIterationStep,
]


def iter_steps(steps: list[AnyStep]) -> Iterator[AnyStep]:
    """Every step of a list and, depth first, every step inside them."""
    for step in steps:
        yield step
        if isinstance(step, (GroupStep, ParallelStep, LoopStep)):
            yield from iter_steps(step.steps)
        elif isinstance(step, IfStep):
            yield from iter_steps(step.then)
            yield from iter_steps(step.else_)
        elif isinstance(step, ChoiceStep):
            for branch in step.branches:
                yield from iter_steps(branch.steps)
