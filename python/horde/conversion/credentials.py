"""Credentials a converted source held, kept out of the plan: each becomes a plan parameter with
an empty default, which the user gives (``-p NAME=...`` or ``HORDE_PARAM_NAME``, the latter kept
secret in what Horde stores: :mod:`horde.plan.redaction`). What names a credential is the plan
layer's rule (:func:`horde.plan.redaction.is_secret_header`, ``is_secret_parameter``).

>>> credentials = Credentials()
>>> credentials.header("Authorization", "Bearer abc.def"), credentials.header("Accept", "*/*")
('Bearer {{ params.authorization }}', None)
>>> credentials.body('{"user": "demo", "password": "hunter22"}')
('{"user": "demo", "password": "{{ params.password }}"}', ['password'])
>>> credentials.parameters
{'authorization': '', 'password': ''}
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, quote

from horde.plan.redaction import is_secret_header, is_secret_parameter

#: Names a variable or parameter may not take: the template context's and the language's words.
RESERVED = {"params", "vu", "iteration", "true", "false", "none", "and", "or", "not", "in", "is", "if", "else", "loop"}
#: Authorization schemes kept in front of the parameter (the plan says what kind of credential).
SCHEMES = ("bearer", "basic", "digest", "token")


def identifier(text: str, taken: set[str]) -> str:
    """A variable or parameter name from ``text``, not in ``taken`` (which it is added to).

    >>> identifier("X-Api-Key", set()), identifier("2fa", set()), identifier("id", {"id"})
    ('x_api_key', 'v_2fa', 'id_2')
    """
    base = re.sub(r"[^a-z0-9_]", "_", text.lower()).strip("_") or "value"
    if base[0].isdigit() or base in RESERVED:
        base = f"v_{base}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def leaves(node: Any, path: str = "$") -> list[tuple[str, str, str]]:
    """(JSONPath, last key, value as text) of a JSON document's scalar leaves (lists: their first 100)."""
    found: list[tuple[str, str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key))
            step = f"{path}.{key}" if plain else f"{path}[{json.dumps(str(key))}]"
            found += [(p, k or str(key), v) for p, k, v in leaves(value, step)]
    elif isinstance(node, list):
        for index, value in enumerate(node[:100]):
            found += leaves(value, f"{path}[{index}]")
    elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
        found.append((path, "", str(node)))
    return found


class Credentials:
    def __init__(self, taken: set[str] | None = None) -> None:
        #: Parameter name -> its default (always empty: the user gives the value).
        self.parameters: dict[str, str] = {}
        #: Names already used in the plan (variables, parameters), shared with the converter.
        self.taken = taken if taken is not None else set()
        self._by_name: dict[str, str] = {}

    def parameter(self, name: str) -> str:
        """The parameter standing for the credential called ``name`` (one per name)."""
        key = name.lower()
        if key not in self._by_name:
            self._by_name[key] = identifier(name, self.taken)
            self.parameters[self._by_name[key]] = ""
        return self._by_name[key]

    def header(self, name: str, value: str) -> str | None:
        """The template a credential header is sent with, or None for any other header."""
        if "{{" in value or not is_secret_header(name):
            return None
        scheme, space, _ = value.partition(" ")
        prefix = f"{scheme} " if space and scheme.lower() in SCHEMES else ""
        return prefix + "{{ params." + self.parameter(name) + " }}"

    def body(self, text: str) -> tuple[str, list[str]]:
        """The body with the values of its fields named like credentials (JSON or a form) as
        parameters, and those fields' names."""
        try:
            fields = [(key, value) for _, key, value in leaves(json.loads(text))]
        except (ValueError, RecursionError):
            fields = parse_qsl(text)
        named: list[str] = []
        for key, value in fields:
            if value and "{{" not in value and is_secret_header(key) and value in text:
                text = text.replace(value, "{{ params." + self.parameter(key) + " }}")
                named.append(key)
        return text, named

    def query(self, path: str) -> tuple[str, list[str]]:
        """The path with its query fields holding credentials as parameters, and their names."""
        named: list[str] = []
        for field, value in parse_qsl(path.partition("?")[2], keep_blank_values=True):
            if value and is_secret_parameter(field):
                template = f"{field}={{{{ params.{self.parameter(field)} }}}}"
                path = path.replace(f"{field}={quote(value, safe='')}", template).replace(f"{field}={value}", template)
                named.append(field)
        return path, named
