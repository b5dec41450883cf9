"""The command line's arguments as Horde reads them and shows them in ``--help``: durations (``--duration 1m30s``), headers
(``-H 'Name: value'``), parameters (``-p NAME=VALUE``) and tags (``--tag key=value``), each
refused with the flag it came from and a hint.

>>> parse_duration("1m30s"), parse_duration("250ms"), parse_duration("20")
(90.0, 0.25, 20.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer.core import TyperCommand, TyperOption

from horde.errors import InvalidInput
from horde.plan.profiles import duration_seconds


def parse_duration(text: str, *, flag: str = "--duration") -> float:
    """Seconds from ``90``, ``90s``, ``1m30s``, ``250ms``, ``2h``."""
    try:
        return duration_seconds(text)
    except ValueError as error:
        hint = (
            "for example 30s"
            if "positive" in str(error)
            else "write seconds (30), or with units: 500ms, 30s, 5m, 1h30m"
        )
        raise InvalidInput(f"{flag}: {error}", hint=hint) from None


def parse_header(text: str) -> tuple[str, str]:
    """``'Name: value'`` as given to ``-H``."""
    name, separator, value = text.partition(":")
    if not separator or not name.strip():
        raise InvalidInput(
            f"-H: '{text}' is not a header", hint="write it as 'Name: value', e.g. -H 'Accept: text/plain'"
        )
    return name.strip(), value.strip()


def parse_param(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as given to ``-p``; the value stays text until the plan's parameter reads it
    (:func:`horde.plan.parameters.parse_parameter_value`).

    >>> parse_param("vus=100"), parse_param("query=a=b")
    (('vus', '100'), ('query', 'a=b'))
    """
    name, separator, value = text.partition("=")
    if not separator or not name.strip():
        raise InvalidInput(f"-p: '{text}' is not NAME=VALUE", hint="for example -p vus=100 -p target_response_ms=50")
    return name.strip(), value


def parse_params(texts: Sequence[str]) -> dict[str, str]:
    """Every ``-p NAME=VALUE``; a name given twice is refused."""
    params: dict[str, str] = {}
    for text in texts:
        name, value = parse_param(text)
        if name in params:
            raise InvalidInput(
                f"-p {name} is given twice", hint=f"keep one: -p {name}={params[name]} or -p {name}={value}"
            )
        params[name] = value
    return params


def parse_tag(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise InvalidInput(f"--tag: '{text}' is not key=value", hint="for example --tag build=1234")
    return key.strip(), value.strip()


#: What ``--help`` shows an option takes, by its Python type (typer would show ``<int>``).
_METAVARS: dict[type, str] = {int: "N", float: "NUMBER", str: "TEXT", Path: "FILE"}


class HordeCommand(TyperCommand):
    """A command whose ``--help`` says what each option takes as a person would: a flag shows
    nothing (not ``<bool>``), a value its name (``N``, ``NUMBER``, ``TEXT``, ``FILE``) unless
    the option gives its own (``NAME=VALUE``)."""

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        for param in params:
            # Typer carries its own copy of click: options are told by typer's class.
            if param.param_type_name != "option" or param.metavar not in (None, ""):
                continue
            if param.is_flag:
                param.metavar = ""
            else:
                param.metavar = _metavar_of(param)
        return params


def _metavar_of(option: TyperOption) -> str:
    python_type: Any = getattr(getattr(option, "type_descriptor", None), "annotation", None)
    if isinstance(python_type, type) and python_type in _METAVARS:
        return _METAVARS[python_type]
    # list[str] and the like: the element's name.
    element = getattr(python_type, "__args__", (None,))[0]
    return _METAVARS.get(element, "VALUE") if isinstance(element, type) else "VALUE"
