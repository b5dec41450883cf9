"""Pydantic's validation errors of a plan, in Horde's words: located, explained, with a hint.

:func:`describe_validation_error` turns each error into a :class:`PlanIssue` whose location is
the place in the input (so a file reader can find its line) and whose message and hint say what
to do; :func:`input_order` sorts problems the way they appear in the input.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from horde.errors import PlanInvalid, Problem
from horde.plan.bounds import shape_problems
from horde.plan.engine_rules import rule_problems, rule_problems_beside
from horde.plan.common import kind_of
from horde.plan.common import ConstantThinkTime, ExponentialThinkTime, NormalThinkTime, UniformThinkTime
from horde.plan.model import Feeder, Plan, Scenario
from horde.plan.steps import (
    BodyContainsCheck,
    BodyMatchesCheck,
    Branch,
    ChoiceStep,
    EndIterationStep,
    Extractor,
    GroupStep,
    HttpStep,
    ParallelStep,
    IfStep,
    JsonCheck,
    LoopStep,
    StatusCheck,
    ThinkStep,
)
from horde.plan.target import Target
from horde.plan.workloads import ClosedModel, ClosedStage, OpenModel, OpenStage


@dataclass(frozen=True)
class PlanIssue:
    """One problem found by pydantic, in Horde's words.

    ``loc`` is the location in the input data (keys and list indices, without pydantic's union
    tags), so a file reader can find the line; ``path`` is the same written as
    ``scenarios[0].steps[1].path``.
    """

    loc: tuple[str | int, ...]
    path: str
    message: str
    hint: str | None


def format_path(loc: tuple[str | int, ...]) -> str:
    """Writes a location the way pydantic users and the engine read it.

    >>> format_path(("scenarios", 0, "steps", 1, "path"))
    'scenarios[0].steps[1].path'
    >>> format_path(())
    ''
    """
    out = ""
    for element in loc:
        if isinstance(element, int):
            out += f"[{element}]"
        else:
            out += f".{element}" if out else element
    return out


def _unwrap(annotation: Any) -> Any:
    """Strips Annotated and Optional; a union of several models stays a tuple of them."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(members) == 1:
                annotation = members[0]
            else:
                return tuple(_unwrap(member) for member in members)
        else:
            return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def wire_keys(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by the key a plan writes (the alias where there is one: ``from``)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _variants(annotation: Any) -> dict[str, type[BaseModel]]:
    """The models of a tagged union by their ``type`` tag; empty for anything else."""
    if not isinstance(annotation, tuple):
        return {}
    variants: dict[str, type[BaseModel]] = {}
    for member in annotation:
        if _is_model(member) and "type" in member.model_fields:
            variants[str(member.model_fields["type"].default)] = member
    return variants


@dataclass
class _Place:
    loc: tuple[str | int, ...]  # the location in the input, union tags and '[key]' dropped
    owner: type[BaseModel] | None  # the model the last key was looked up in
    field: FieldInfo | None  # that key's field, if the model has it
    annotation: Any  # what is expected at the location (a model, a tuple of models, ...)
    siblings: dict[str, type[BaseModel]]  # when owner is one type of a tagged union: all types


def _resolve(raw: tuple[str | int, ...], root: type[BaseModel]) -> _Place:
    loc: list[str | int] = []
    owner: type[BaseModel] | None = None
    field: FieldInfo | None = None
    annotation: Any = root
    siblings: dict[str, type[BaseModel]] = {}
    current: dict[str, type[BaseModel]] = {}
    for element in raw:
        if element == "[key]":
            continue
        variants = _variants(annotation)
        if isinstance(element, str) and element in variants:
            annotation, current = variants[element], variants
            continue
        loc.append(element)
        origin = typing.get_origin(annotation)
        if _is_model(annotation):
            owner, field = annotation, wire_keys(annotation).get(str(element))
            siblings, current = current, {}
            annotation = _unwrap(field.annotation) if field is not None else None
        elif origin is list and isinstance(element, int):
            annotation = _unwrap(typing.get_args(annotation)[0])
        elif origin is dict:
            annotation = _unwrap(typing.get_args(annotation)[1])
        else:
            annotation = None
    return _Place(tuple(loc), owner, field, annotation, siblings)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _got(value: Any) -> str:
    text = kind_of(value)
    return f" (got {text})" if len(text) <= 80 else ""


def _field_hint(place: _Place) -> str | None:
    keys = [element for element in place.loc if isinstance(element, str)]
    if place.field is None or not place.field.description or not keys:
        return None
    return f"'{keys[-1]}': {place.field.description}"


def _allowed_keys(model: type[BaseModel]) -> str:
    return ", ".join(wire_keys(model))


def _tags(annotation: Any) -> str:
    return ", ".join(f"'{tag}'" for tag in _variants(annotation))


def _describe(error: ErrorDetails, root: type[BaseModel]) -> PlanIssue:
    kind: str = error["type"]
    raw_loc: tuple[str | int, ...] = tuple(error["loc"])
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    place = _resolve(raw_loc, root)
    loc = place.loc
    message: str = error["msg"]
    hint = _field_hint(place)

    if "detail" in ctx and "hint" in ctx:  # raised by one of the validators above
        message, hint = str(ctx["detail"]), str(ctx["hint"])
    elif kind == "missing":
        message = "is required but missing"
        hint = f"add {hint}" if hint else f"add '{loc[-1]}'" if loc else None
    elif kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        message = f"unknown key '{key}'"
        if place.owner is not None:
            allowed = list(wire_keys(place.owner))
            hint = f"allowed keys here: {', '.join(allowed)}"
            close = difflib.get_close_matches(key, allowed, n=1)
            elsewhere = [tag for tag, model in place.siblings.items() if key in wire_keys(model)]
            if elsewhere:
                hint += f"; '{key}' belongs to type " + " or ".join(f"'{t}'" for t in elsewhere)
            elif close:
                hint += f"; did you mean '{close[0]}'?"
        else:
            hint = None
    elif kind == "union_tag_invalid":
        loc = (*loc, "type")  # every tagged union of the plan is tagged by 'type'
        message = f"unknown type '{ctx.get('tag')}'"
        hint = f"use one of: {_tags(place.annotation) or ctx.get('expected_tags')}"
    elif kind == "union_tag_not_found":
        message = "missing 'type'"
        hint = f"add 'type': one of {_tags(place.annotation)}"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = f"must be a mapping{_got(value)}"
        if not loc and root is Plan:
            hint = "a plan is a mapping with the keys version, target and scenarios; see examples/quickstart/plan.yaml"
        elif _is_model(place.annotation):
            hint = f"write a mapping with the keys: {_allowed_keys(place.annotation)}"
        elif _variants(place.annotation):
            hint = f"write a mapping with 'type': one of {_tags(place.annotation)}"
    elif kind == "list_type":
        message = f"must be a list{_got(value)}"
        hint = f"write a list ('- ' items in YAML); {hint}" if hint else "write a list"
    elif kind == "too_short":
        message = "must not be empty"
    elif kind == "greater_than":
        message = f"must be greater than {_number(ctx.get('gt'))}{_got(value)}"
    elif kind == "greater_than_equal":
        message = f"must be {_number(ctx.get('ge'))} or more{_got(value)}"
    elif kind == "less_than_equal":
        message = f"must be at most {_number(ctx.get('le'))}{_got(value)}"
    elif kind == "string_too_short":
        message = "must not be empty"
    elif kind == "string_type" and isinstance(value, (int, float, bool)):
        message = f"must be text{_got(value)}"
        hint = f"quote the value, e.g. \"{value}\""
    elif kind == "literal_error" and loc == ("version",):
        message = f"unsupported plan version{_got(value)}"
        hint = "this Horde reads plan version 1: write 'version: 1'"
    elif kind == "invalid_key":
        message = f"keys must be text{_got(value)}"
        hint = "quote the key"
    else:
        message = f"{message}{_got(value)}"
        if isinstance(value, str) and "{{" in value:
            hint = (
                "only a value that is exactly '{{ params.NAME }}' is replaced here (by the "
                "parameter's value, before the plan is checked); other templates are for "
                "paths, headers and bodies"
            )
    return PlanIssue(loc=loc, path=format_path(loc), message=message, hint=hint)


_MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (
        Plan,
        Target,
        Scenario,
        Feeder,
        HttpStep,
        Extractor,
        StatusCheck,
        JsonCheck,
        BodyContainsCheck,
        BodyMatchesCheck,
        GroupStep,
        ParallelStep,
        ChoiceStep,
        Branch,
        LoopStep,
        IfStep,
        ThinkStep,
        EndIterationStep,
        ConstantThinkTime,
        UniformThinkTime,
        ExponentialThinkTime,
        NormalThinkTime,
        ClosedModel,
        ClosedStage,
        OpenModel,
        OpenStage,
    )
}


def describe_validation_error(error: ValidationError, *, limit: int | None = None) -> list[PlanIssue]:
    """Every problem of a pydantic ValidationError (the first ``limit`` of them), with a message
    and a hint.

    The error normally comes from validating a :class:`Plan`; one raised by another model of this
    module (``HttpStep(method="get", ...)`` in Python code) is located relative to that model.
    """
    root = _MODELS.get(error.title, Plan)
    return [_describe(line, root) for line in error.errors(include_url=False)[:limit]]


def input_order(data: Any, loc: tuple[str | int, ...]) -> tuple[int, ...]:
    """A sort key that puts problems in the order their places appear in the input.

    A key the input lacks (a missing one) sorts after the keys of its mapping.

    >>> data = {"version": 1, "target": {"base_url": "x"}, "scenarios": []}
    >>> sorted([("scenarios",), ("target", "headers"), ("target", "base_url")],
    ...        key=lambda loc: input_order(data, loc))
    [('target', 'base_url'), ('target', 'headers'), ('scenarios',)]
    """
    key: list[int] = []
    node = data
    for element in loc:
        if isinstance(node, dict):
            keys = [str(k) for k in node]
            index = keys.index(str(element)) if str(element) in keys else len(keys)
            key.append(index)
            node = node.get(element) if index < len(keys) else None
        elif isinstance(node, list) and isinstance(element, int):
            key.append(element)
            node = node[element] if 0 <= element < len(node) else None
        else:
            break
    return tuple(key)


def plan_from_dict(data: Any, *, source: str | None = None) -> Plan:
    """Validates plain data (what a YAML or JSON file holds) into a :class:`Plan`.

    Raises :class:`~horde.errors.PlanInvalid` listing every problem found, each located by its
    path (``scenarios[0].steps[1].path``) and with a hint. ``source`` names where the data came
    from in the error's message. Parameters (``{{ params.NAME }}``) are not substituted here:
    :func:`horde.plan.loader.load_plan` and :func:`horde.plan.builder.plan` do that first.
    The bounds of :mod:`horde.plan.bounds` are checked before anything walks the data; once
    pydantic has read the types, the engine's rules (:mod:`horde.plan.engine_rules`).
    """
    shaped = shape_problems(data)
    if shaped:
        raise PlanInvalid(
            [Problem(location=format_path(loc), message=message, hint=hint) for loc, message, hint in shaped],
            source=source,
        )
    try:
        plan = Plan.model_validate(data)
    except ValidationError as error:
        issues = [(i.loc, i.message, i.hint) for i in describe_validation_error(error)]
        issues += rule_problems_beside(data, [loc for loc, _, _ in issues])
        raise PlanInvalid(_problems(data, issues), source=source) from None
    ruled = rule_problems(plan)
    if ruled:
        raise PlanInvalid(_problems(data, ruled), source=source)
    return plan


def _problems(data: Any, issues: list[tuple[tuple[str | int, ...], str, str | None]]) -> list[Problem]:
    """Each problem at its place, in the order the places appear in ``data``."""
    issues = sorted(issues, key=lambda issue: input_order(data, issue[0]))
    return [Problem(location=format_path(loc), message=message, hint=hint) for loc, message, hint in issues]
