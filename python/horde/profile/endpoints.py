"""Endpoint templates: many request paths grouped as one endpoint.

An endpoint is a method and a path template: the parts of a path that vary per request — numbers,
UUIDs, hexadecimal ids, long random tokens (letters and digits, or letters only in a random-looking
mix), e-mail addresses — become placeholders (``{id}``, ``{token}``, ``{email}``), the segment
after one named like a credential becomes ``{secret}`` whatever it looks like
(``/reset-token/{secret}``, ``/api/key/{secret}``; not when it is itself a credential's name in
lowercase, ``/oauth/token``), and the query string is kept by its parameters' names
(``GET /users/{id}/orders?page``). Templates given with ``--template`` (``/users/{name}`` or
``GET /users/{name}``) come first: a path they match takes their shape.

Each placeholder is a *slot* whose values may be kept for the plan — but only where they are
plain ids: values of secret-named query parameters (``token``, ``sig``...), e-mail addresses,
tokens and whatever follows a path segment named like a secret (``/reset-token/XYZ``) are never
kept (:mod:`horde.plan.redaction` decides what is secret); neither is the value of a given
template's placeholder named like a secret (``{token}``) or after such a segment.

The automatic templates' rules (what an id looks like, where a slot goes, which values are
kept) are the native reader's, crate ``horde-logs`` (:mod:`horde.engine.logs`); it asks this
module's :data:`RULES` (Horde's redaction rules) what names a secret and what holds an e-mail
address. Given templates are matched here.

>>> templater = Templater()
>>> shape, values = templater.template("GET", "/users/42/orders?page=2&token=abc")
>>> shape.name, values
('GET /users/{id}/orders?page&token', ('42', '2', None))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from horde.engine.logs import GivenTemplate as NativeGiven
from horde.engine.logs import SecretRules
from horde.engine.logs import Templater as NativeTemplater
from horde.engine.logs import classify as native_classify
from horde.errors import InvalidInput
from horde.plan.redaction import has_email, is_secret_parameter as _is_secret_parameter

#: Distinct requests remembered with their template (a static path repeats; an id path rarely).
CACHE_SIZE = 65536


#: Whether a name (a query field's, a path segment's) is a credential's: asked per request for
#: the same few names, so remembered.
is_secret_parameter = lru_cache(maxsize=4096)(_is_secret_parameter)


def names_a_secret(segment: str) -> bool:
    """Whether a path segment names a credential, so that the next segment holds one
    (``/reset-token/XYZ``, ``/api/key/XYZ``, ``/session/XYZ``)."""
    return bool(segment) and is_secret_parameter(segment.replace("-", "_"))


#: Horde's redaction rules, as the native templater asks them.
RULES = SecretRules(is_secret_parameter=is_secret_parameter, names_a_secret=names_a_secret, has_email=has_email)


class Slot(NamedTuple):
    """A placeholder of an endpoint: its label (``id``, a given name, a query parameter's name),
    the kind of its values, and whether it is in the path or the query."""

    label: str
    kind: str  # int | uuid | hex | token | email | named (a given template's) | query | secret
    where: str  # path | query


class Shape(NamedTuple):
    """An endpoint: its method, its path as pieces (literal text, or the index of a slot) and
    its query parameters' names, in order. (A named tuple: made and hashed per request, in C.)"""

    method: str
    pieces: tuple[str | int, ...]
    query: tuple[str, ...]
    slots: tuple[Slot, ...]

    @property
    def path(self) -> str:
        """The path template as shown: ``/users/{id}/orders``."""
        return "".join(
            piece if isinstance(piece, str) else "{" + self.slots[piece].label + "}" for piece in self.pieces
        )

    @property
    def name(self) -> str:
        """The endpoint's name: ``GET /users/{id}/orders?page``."""
        query = "?" + "&".join(self.query) if self.query else ""
        return f"{self.method} {self.path}{query}"


def classify(segment: str) -> str | None:
    """The kind of id a path segment (or a value) is, or None when it is literal text.

    >>> [classify(s) for s in ("42", "users", "3f2a9c0d1e", "deadbeef", "a@b.io", "qZkTwRbXmPvLsNdH")]
    ['int', None, 'hex', None, 'email', 'token']
    """
    return native_classify(segment, RULES)


class GivenTemplate:
    """A template given by the user: ``/users/{name}/orders`` or ``POST /users/{name}``: its
    method, pieces, labels and which placeholders hold a secret whatever their value; the native
    templater matches paths against it (a placeholder: one path segment's text or more)."""

    def __init__(self, text: str) -> None:
        method, _, path = text.strip().rpartition(" ")
        method = method.strip().upper()
        if not path.startswith("/") or (method and not re.fullmatch(r"[A-Z]+", method)):
            raise InvalidInput(
                f"--template: {text!r} is not a path template",
                hint="write it as /users/{id}/orders or GET /users/{id} (a {name} matches one path segment)",
            )
        self.method = method or None
        self.text = path
        pieces: list[str | int] = []
        labels: list[str] = []
        secret: list[bool] = []
        before = ""  # the path up to the placeholder
        for position, part in enumerate(re.split(r"(\{[^{}/]*\})", path)):
            if position % 2 == 0:
                before += part
                if part:
                    pieces.append(part)
                continue
            label = part[1:-1]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label):
                raise InvalidInput(
                    f"--template {text!r}: {part} is not a placeholder",
                    hint="a placeholder is a name in braces, e.g. {id} or {user}",
                )
            pieces.append(len(labels))
            labels.append(label)
            # {token}, or a placeholder after a segment named like a secret (/reset-token/{t}).
            secret.append(
                is_secret_parameter(label) or (before.endswith("/") and names_a_secret(before[:-1].rpartition("/")[2]))
            )
            before += part
        self.pieces = tuple(pieces)
        self.labels = tuple(labels)
        self.secret = tuple(secret)

    def native(self) -> NativeGiven:
        """The template as the native templater takes it."""
        return (self.method, list(self.pieces), list(self.labels), list(self.secret))


class Templater:
    """Turns a request's method and target into its endpoint and its slots' values."""

    def __init__(self, given: Sequence[str] = (), max_shapes: int = 10_000) -> None:
        self._given = [GivenTemplate(text) for text in given]
        #: One object per endpoint (so that a caller may key by its id), for the first
        #: max_shapes endpoints: a log of ever new paths must not grow the memory.
        self._shapes: dict[Shape, Shape] = {}
        self._max_shapes = max_shapes
        self._cache: dict[tuple[str, str], tuple[Shape, tuple[str | None, ...]]] = {}
        self._native = NativeTemplater(RULES, [given.native() for given in self._given])

    def template(self, method: str, target: str) -> tuple[Shape, tuple[str | None, ...]]:
        key = (method, target)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        pieces, query, found, values = self._native.template(method, target)
        shape = Shape(
            method, tuple(pieces), tuple(query), tuple(_slot(label, kind, where) for label, kind, where in found)
        )
        known = self._shapes.get(shape)
        if known is not None:
            shape = known
        elif len(self._shapes) < self._max_shapes:
            self._shapes[shape] = shape
        result = (shape, tuple(values))
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()  # bounded memory; static paths come back within a few lines
        self._cache[key] = result
        return result


@lru_cache(maxsize=1024)
def _slot(label: str, kind: str, where: str) -> Slot:
    """One Slot object per distinct slot (a request's slots are compared, not rebuilt)."""
    return Slot(label, kind, where)
