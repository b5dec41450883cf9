"""What the models of the plan share: the rules for keys, upper bounds, located errors, header and
name checks, and the think times (used by steps and by the ``think`` step).

Import the models from :mod:`horde.plan`; this module is its foundation, split out so that the
steps (:mod:`horde.plan.steps`) and the plan can both build on it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal, NoReturn, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from horde.plan.bounds import MAX_GRACEFUL_STOP_S as MAX_GRACEFUL_STOP_S
from horde.plan.bounds import MAX_LOOP_COUNT as MAX_LOOP_COUNT
from horde.plan.bounds import MAX_RATE_PER_S as MAX_RATE_PER_S
from horde.plan.bounds import MAX_STAGE_DURATION_S as MAX_STAGE_DURATION_S
from horde.plan.bounds import MAX_STEP_DEPTH as MAX_STEP_DEPTH
from horde.plan.bounds import MAX_THINK_TIME_MS as MAX_THINK_TIME_MS
from horde.plan.bounds import MAX_TIMEOUT_MS as MAX_TIMEOUT_MS
from horde.plan.bounds import MAX_VUS as MAX_VUS
from horde.plan.bounds import MAX_WEIGHT as MAX_WEIGHT

#: The HTTP methods a step may use, upper case as they go on the wire.

#: An http step's method as a static type (for the builder and mypy); its values are horde-plan's
#: METHODS, which a test holds it to (tests/test_plan_rules_owner.py).
Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

MAX_PACING_S = MAX_STAGE_DURATION_S  # as long as a stage
MAX_LOOP_ITERATIONS = MAX_LOOP_COUNT  # a while loop's max_iterations: the engine's one loop bound

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def type_is_required(schema: dict[str, Any]) -> None:
    # The ``type`` of a think time, workload, check or non-HTTP step has a default for Python
    # code, but a file must write it (it selects the model), so the schema says it is required.
    schema["required"] = ["type", *schema.get("required", [])]


# Shared by every model: unknown keys are errors, numbers must be finite (JSON has no NaN), and
# a model writes its wire names (``from``, ``while``...) whatever its Python attribute is called.
STRICT_KEYS = ConfigDict(extra="forbid", allow_inf_nan=False, serialize_by_alias=True)

# The models of a tagged union: selected by their ``type`` key.
TAGGED = ConfigDict(extra="forbid", allow_inf_nan=False, serialize_by_alias=True, json_schema_extra=type_is_required)


# --- errors raised by the validators ---------------------------------------------------------
#
# A validator reports through PydanticCustomError with the message and its hint in ``ctx`` so
# that describe_validation_error() can pair them. Cross-field checks raise a ValidationError whose
# line errors carry a location *relative to the model or field being validated*; pydantic
# prefixes the outer location, so a duplicate step name is reported at
# ``scenarios[0].steps[2].name`` rather than at the scenario.


def custom(kind: str, message: str, hint: str) -> PydanticCustomError:
    """A validation error with Horde's message and hint."""
    # The template is a single placeholder filled from ctx: user text (a path such as '/{id}')
    # may hold braces, and "hint" comes first so that its substitution cannot touch the message.
    return PydanticCustomError(kind, "{detail}", {"hint": hint, "detail": message})


Located = tuple[tuple[str | int, ...], Any, PydanticCustomError]


Loc = tuple[str | int, ...]

_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_path(path: str) -> Loc:
    """A location from its written form (``scenarios[0].steps[1].path``, as the engine and
    :func:`horde.plan.problems.format_path` write it)."""
    return tuple(int(index) if index else key for key, index in _PATH_PART.findall(path))


def raise_located(title: str, errors: list[Located]) -> NoReturn:
    """Raises every error at once, each at its location relative to what is being validated."""
    details = [InitErrorDetails(type=error, loc=loc, input=value) for loc, value, error in errors]
    raise ValidationError.from_exception_data(title, details)


def reraisable(line: ErrorDetails) -> InitErrorDetails:
    """A line of a caught ValidationError, ready to be raised again with others."""
    ctx = line.get("ctx")
    if ctx is not None and "detail" in ctx and "hint" in ctx:
        kind = PydanticCustomError(line["type"], "{detail}", {"hint": ctx["hint"], "detail": ctx["detail"]})
        return InitErrorDetails(type=kind, loc=line["loc"], input=line["input"])
    details = InitErrorDetails(type=line["type"], loc=line["loc"], input=line["input"])
    if ctx is not None:
        details["ctx"] = ctx
    return details


def is_identifier(name: str) -> bool:
    """``True`` for a name made of letters, digits and '_', not starting with a digit."""
    return bool(_IDENTIFIER.match(name))


def check_json_value(value: Any) -> Any:
    """A JSON value: null, true/false, a finite number, text, a list or a mapping with text keys."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise custom(
                "json_number",
                f"{item} is not a JSON number",
                "JSON has no NaN or infinity; write a finite number or a string",
            )
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                raise custom("json_key", "JSON object keys must be text", "quote the keys")
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif item is not None and not isinstance(item, (bool, int, float, str)):
            raise custom(
                "json_value",
                f"a {type(item).__name__} is not a JSON value",
                "use null, true/false, numbers, text, lists and mappings",
            )
    return value


def validate_unique_names(items: Any, handler: ValidatorFunctionWrapHandler, what: str) -> Any:
    """Validates a list of named things; duplicate names are reported even when items are bad.

    The names are read from the input before validation, so a duplicate is listed together with
    the other problems of the list rather than only once those are fixed.
    """
    duplicates: list[Located] = []
    if isinstance(items, list):
        first_index: dict[str, int] = {}
        for index, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
            if not isinstance(name, str):
                continue
            if name in first_index:
                duplicates.append(
                    (
                        (index, "name"),
                        name,
                        custom(
                            "duplicate_name",
                            f"duplicate {what} name '{name}' (also at index {first_index[name]})",
                            f"give each {what} its own name; results are reported by {what} name",
                        ),
                    )
                )
            else:
                first_index[name] = index
    return with_problems(items, handler, duplicates, what, ())


def kind_of(value: Any) -> str:
    """How a problem names a value it refuses: ``a mapping``, ``the number 3``, ``the text 'x'``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"a {type(value).__name__}"


def with_problems(
    data: Any,
    handler: ValidatorFunctionWrapHandler,
    problems: list[Located],
    title: str,
    order: tuple[str, ...],
) -> Any:
    """Validates ``data`` with ``handler``; ``problems`` found beforehand are raised with the
    handler's own, sorted by the field they belong to (``order``) so they read in model order."""
    try:
        validated = handler(data)
    except ValidationError as error:
        if not problems:
            raise
        raise merged(error, problems, order) from None
    if problems:
        raise_located(title, problems)
    return validated


def merged(error: ValidationError, problems: list[Located], order: tuple[str, ...]) -> ValidationError:
    """``error``'s lines and ``problems`` as one error, sorted by the field each belongs to
    (``order``, the model's fields) so they read in model order."""
    lines = [reraisable(line) for line in error.errors()]
    lines += [InitErrorDetails(type=kind, loc=loc, input=value) for loc, value, kind in problems]
    if order:
        lines.sort(
            key=lambda line: (
                order.index(str(line["loc"][0])) if line["loc"] and str(line["loc"][0]) in order else len(order)
            )
        )
    return ValidationError.from_exception_data(error.title, lines)


# --- think times -----------------------------------------------------------------------------


class ConstantThinkTime(BaseModel):
    """The same pause every time."""

    model_config = TAGGED

    type: Literal["constant"] = Field(default="constant", description="this think time: 'constant'")
    duration_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the pause, in milliseconds; >= 0")


class UniformThinkTime(BaseModel):
    """A pause drawn uniformly between min_ms and max_ms."""

    model_config = TAGGED

    type: Literal["uniform"] = Field(default="uniform", description="this think time: 'uniform'")
    min_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the shortest pause, in milliseconds; >= 0")
    max_ms: float = Field(
        ge=0, le=MAX_THINK_TIME_MS, description="the longest pause, in milliseconds; >= 0 and >= min_ms"
    )


class ExponentialThinkTime(BaseModel):
    """A pause drawn from an exponential distribution (a Poisson process of user actions)."""

    model_config = TAGGED

    type: Literal["exponential"] = Field(default="exponential", description="this think time: 'exponential'")
    mean_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the mean pause, in milliseconds; >= 0")


class NormalThinkTime(BaseModel):
    """A pause drawn from a normal distribution, cut at 0 (people's reading times cluster)."""

    model_config = TAGGED

    type: Literal["normal"] = Field(default="normal", description="this think time: 'normal'")
    mean_ms: float = Field(ge=0, le=MAX_THINK_TIME_MS, description="the mean pause, in milliseconds; >= 0")
    stddev_ms: float = Field(
        ge=0, le=MAX_THINK_TIME_MS, description="the standard deviation, in milliseconds; >= 0 (draws below 0 become 0)"
    )


ThinkTime = Annotated[
    Union[ConstantThinkTime, UniformThinkTime, NormalThinkTime, ExponentialThinkTime],
    Field(discriminator="type"),
]

THINK_TIME_DESCRIPTION = (
    "{type: constant, duration_ms}, {type: uniform, min_ms, max_ms}, {type: normal, mean_ms, stddev_ms} "
    "or {type: exponential, mean_ms}"
)
