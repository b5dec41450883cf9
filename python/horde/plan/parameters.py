"""Plan parameters: ``{{ params.NAME }}`` replaced by their values before a plan is checked.

A plan declares its parameters with defaults (``parameters: {vus: 100, duration_s: 60}``); each
value comes from, in order, ``-p NAME=VALUE`` (``explicit`` here), the environment variable
``HORDE_PARAM_NAME`` (upper case), the default. Every string of the plan may refer to them:

- a string that is exactly ``"{{ params.vus }}"`` becomes the value itself, with its type, so
  parameters work in numeric fields;
- inside a longer string the value is formatted in (``"/items?limit={{ params.limit }}"``);
  booleans as ``true``/``false``;
- any other template (``{{ building_id }}``, ``{{ params.vus * 2 }}``) is left alone: the
  engine renders it at run time.

>>> substitute_parameters({"vus": "{{ params.vus }}", "path": "/a?n={{params.vus}}"}, {"vus": 5}).data
{'vus': 5, 'path': '/a?n=5'}

Text from the command line or the environment is read as a JSON scalar when it is one (``10``,
``1.5``, ``true``), except for a parameter whose default is text, which stays text:

>>> parse_parameter_value("10"), parse_parameter_value("1.5"), parse_parameter_value("true")
(10, 1.5, True)
>>> parse_parameter_value("10", default="build-7"), parse_parameter_value("ab c")
('10', 'ab c')
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Union

from horde.errors import InvalidInput

__all__ = [
    "ENV_PREFIX",
    "PARAMETER_REFERENCE",
    "Substituted",
    "apply_parameters",
    "current_explicit_parameters",
    "env_name",
    "explicit_parameters",
    "parse_parameter_value",
    "resolve_parameters",
    "substitute_parameters",
    "unknown_parameter_hint",
]

ParameterValue = Union[bool, int, float, str]
Loc = tuple[Union[str, int], ...]

#: A reference to a parameter: ``{{ params.NAME }}`` (spaces optional).
PARAMETER_REFERENCE = re.compile(r"\{\{\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

#: The environment variables that set parameters: ``HORDE_PARAM_`` + the name in upper case.
ENV_PREFIX = "HORDE_PARAM_"


def env_name(name: str) -> str:
    """The environment variable that sets parameter ``name``.

    >>> env_name("target_response_ms")
    'HORDE_PARAM_TARGET_RESPONSE_MS'
    """
    return ENV_PREFIX + name.upper()


def _refuse_constant(text: str) -> Any:
    raise ValueError(text)  # NaN, Infinity: not JSON numbers


def parse_parameter_value(text: str, default: object = None) -> ParameterValue:
    """A parameter's value from text (``-p`` or the environment); see the module's rules."""
    if isinstance(default, str) or text.lstrip().startswith(("[", "{")):
        return text  # a JSON list or object is no parameter value: never decoded, however deep
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (RecursionError, ValueError):
        return text
    if isinstance(value, (bool, int, float)):
        return value
    return text


def _is_value(value: object) -> bool:
    return isinstance(value, (bool, int, float, str))


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean (true or false)"
    if isinstance(value, (int, float)):
        return "a number"
    return "text"


def _same_kind(value: object, default: object) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return True


def _listed(names: list[str]) -> str:
    return ", ".join(sorted(names))


def resolve_parameters(
    declared: Mapping[str, object],
    explicit: Mapping[str, object] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, ParameterValue]:
    """The value of each declared parameter: ``explicit``, else the environment, else its default.

    A text value is read by :func:`parse_parameter_value`; a value whose kind (number, boolean,
    text) differs from its default's is refused, as is an explicit name the plan does not declare
    (:class:`~horde.errors.InvalidInput`, with the declared names in the hint).
    """
    explicit = explicit or {}
    environ = os.environ if environ is None else environ
    unknown = [name for name in explicit if name not in declared]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, list(declared), n=1)
        if declared:
            hint = f"this plan's parameters: {_listed(list(declared))}"
            hint += f"; did you mean '{close[0]}'?" if close else ""
        else:
            hint = f"this plan declares no parameters; add e.g. `parameters: {{{name}: DEFAULT}}` to it"
        raise InvalidInput(f"-p {name}: the plan has no parameter '{name}'", hint=hint)
    values: dict[str, ParameterValue] = {}
    for name, default in declared.items():
        if not _is_value(default):
            continue  # the plan's check reports it
        source: str | None = None
        value: object = default
        if name in explicit:
            raw = explicit[name]
            value = parse_parameter_value(raw, default) if isinstance(raw, str) else raw
            source = f"-p {name}={_shown(raw)}"
        elif env_name(name) in environ:
            raw = environ[env_name(name)]
            value = parse_parameter_value(raw, default)
            source = f"{env_name(name)}={_shown(raw)}"
        if source is not None and (not _is_value(value) or not _same_kind(value, default)):
            raise InvalidInput(
                f"{source}: parameter '{name}' takes {_kind(default)} (its default is {json.dumps(default)})",
                hint=f"give {_kind(default)}, e.g. -p {name}={json.dumps(default) if not isinstance(default, str) else default}",
            )
        values[name] = value  # type: ignore[assignment]  # checked by _is_value/_same_kind
    return values


def _shown(raw: object, limit: int = 60) -> str:
    """A value as an error message quotes it: cut past ``limit`` characters (a value of 5,000
    brackets is shown by its start and its length)."""
    text = str(raw)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _formatted(value: ParameterValue) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class Substituted:
    """What :func:`substitute_parameters` did.

    ``data``: a copy with the references replaced; ``unknown``: each reference to a parameter
    that has no value, as (location of the string, name), left in place; ``origins``: the
    location of each value that was a whole reference, and the parameter it came from.
    """

    data: Any
    unknown: list[tuple[Loc, str]] = field(default_factory=list)
    origins: dict[Loc, str] = field(default_factory=dict)


def substitute_parameters(
    data: Any, values: Mapping[str, ParameterValue], *, skip_top: tuple[str, ...] = ()
) -> Substituted:
    """Replaces ``{{ params.NAME }}`` in every string of ``data`` (values of mappings and items of
    lists, not keys); top-level keys named in ``skip_top`` are copied as they are."""
    result = Substituted(data=None)

    def text(value: str, loc: Loc) -> Any:
        whole = PARAMETER_REFERENCE.fullmatch(value.strip())
        if whole is not None:
            name = whole.group(1)
            if name in values:
                result.origins[loc] = name
                return values[name]
            result.unknown.append((loc, name))
            return value

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in values:
                return _formatted(values[name])
            result.unknown.append((loc, name))
            return match.group(0)

        return PARAMETER_REFERENCE.sub(replace, value) if "{{" in value else value

    def walk(node: Any, loc: Loc) -> Any:
        if isinstance(node, str):
            return text(node, loc)
        if isinstance(node, dict):
            return {
                key: (value if not loc and key in skip_top else walk(value, (*loc, key))) for key, value in node.items()
            }
        if isinstance(node, list):
            return [walk(item, (*loc, index)) for index, item in enumerate(node)]
        return node

    result.data = walk(data, ())
    return result


def apply_parameters(data: Any, explicit: Mapping[str, object] | None = None) -> Substituted:
    """Resolves the parameters ``data`` (a plan as plain data) declares and substitutes them;
    the copy's ``parameters`` holds the values used."""
    declared = data.get("parameters") if isinstance(data, dict) else None
    if not isinstance(declared, dict):
        declared = {}
    declared = {str(name): value for name, value in declared.items()}
    values = resolve_parameters(declared, explicit)
    result = substitute_parameters(data, values, skip_top=("parameters",))
    if isinstance(result.data, dict) and "parameters" in result.data and isinstance(data.get("parameters"), dict):
        result.data["parameters"] = {**data["parameters"], **values}
    return result


def unknown_parameter_hint(name: str, declared: list[str]) -> str:
    """The hint for a reference to parameter ``name`` that the plan does not declare."""
    if not declared:
        return f"declare it with a default: parameters: {{{name}: DEFAULT}}"
    hint = f"declared parameters: {_listed(declared)}; add '{name}' under 'parameters' with a default"
    close = difflib.get_close_matches(name, declared, n=1)
    return f"did you mean '{close[0]}'? " + hint if close else hint


# --- the values given to a Python plan while load_plan runs it --------------------------------

_EXPLICIT: ContextVar[Mapping[str, object] | None] = ContextVar("horde_explicit_parameters", default=None)


@contextmanager
def explicit_parameters(values: Mapping[str, object] | None) -> Iterator[None]:
    """Within the block, :func:`horde.plan.builder.plan` takes parameter values from ``values`` (what
    ``-p`` gave) before the environment and the defaults; :func:`horde.plan.loader.load_plan` runs a
    ``.py`` plan inside it."""
    token = _EXPLICIT.set(dict(values or {}))
    try:
        yield
    finally:
        _EXPLICIT.reset(token)


def current_explicit_parameters() -> Mapping[str, object]:
    """The values set by the innermost :func:`explicit_parameters` block (none outside one)."""
    return _EXPLICIT.get() or {}
