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

>>> templater = Templater()
>>> shape, values = templater.template("GET", "/users/42/orders?page=2&token=abc")
>>> shape.name, values
('GET /users/{id}/orders?page&token', ('42', '2', None))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Final, NamedTuple

from horde.errors import InvalidInput
from horde.plan.redaction import has_email, is_secret_parameter as _is_secret_parameter

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}")
_TOKEN = re.compile(r"(?=(?:[^0-9]*[0-9]){3})(?=(?:[^A-Za-z]*[A-Za-z]){3})[A-Za-z0-9_~.=-]{20,}")
_NAME = re.compile(r"[A-Za-z0-9_.\[\]-]{1,40}")
#: Lowercase words: one that names a credential (``token``, ``api-key``, ``session``) names it
#: rather than holding it, and is kept as text even after a secret-named segment (``/oauth/token``).
_ROUTE_WORD = re.compile(r"[a-z]+(?:[-_][a-z]+)*")
_VOWELS: Final = frozenset("aeiouAEIOU")
#: Letters-only segments at least this long are looked at for a random mix (a key, a session id).
RANDOM_LETTERS_LENGTH = 16
#: Distinct paths remembered with their template (a static path repeats; an id path rarely).
CACHE_SIZE = 65536
#: Longest value kept for the plan (a longer one is more likely text than an id).
MAX_VALUE_LENGTH = 64
_DIGITS_TO_ZERO: Final = str.maketrans("123456789", "000000000")
#: Placeholder labels by kind of value.
LABELS: Final = {"int": "id", "uuid": "id", "hex": "id", "token": "token", "email": "email", "secret": "secret"}


#: Whether a name (a query field's, a path segment's) is a credential's: asked per request for
#: the same few names, so remembered.
is_secret_parameter = lru_cache(maxsize=4096)(_is_secret_parameter)


class Slot(NamedTuple):
    """A placeholder of an endpoint: its label (``id``, a given name, a query parameter's name),
    the kind of its values, and whether it is in the path or the query."""

    label: str
    kind: str    # int | uuid | hex | token | email | named (a given template's) | query | secret
    where: str   # path | query


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
        return "".join(piece if isinstance(piece, str) else "{" + self.slots[piece].label + "}" for piece in self.pieces)

    @property
    def name(self) -> str:
        """The endpoint's name: ``GET /users/{id}/orders?page``."""
        query = "?" + "&".join(self.query) if self.query else ""
        return f"{self.method} {self.path}{query}"


def classify(segment: str) -> str | None:
    """The kind of id a path segment (or a value) is, or None when it is literal text.

    >>> [classify(s) for s in ("42", "users", "3f2a9c0d1e", "deadbeef", "a@b.io")]
    ['int', None, 'hex', None, 'email']
    """
    if segment.isdigit():
        return "int"
    if "@" in segment or "%40" in segment:
        return "email" if has_email(segment) else None
    if len(segment) < 8:
        return None
    if _UUID.fullmatch(segment):
        return "uuid"
    if _HEX.fullmatch(segment):
        return "hex"
    if _TOKEN.fullmatch(segment) or random_letters(segment):
        return "token"
    return None


def random_letters(segment: str) -> bool:
    """Whether a letters-only segment looks drawn at random (a key or a session id), not written
    (``productRecommendations``, ``ORDERCONFIRMATION``): at least 16 letters with few vowels, and
    in mixed case the case changing often (camelCase changes it once a word).

    >>> [random_letters(s) for s in ("qZkTwRbXmPvLsNdH", "XMLHttpRequestHandler", "checkoutConfirmationPage")]
    [True, False, False]
    """
    if len(segment) < RANDOM_LETTERS_LENGTH or not (segment.isascii() and segment.isalpha()):
        return False
    vowels = sum(character in _VOWELS for character in segment) / len(segment)
    if segment.islower() or segment.isupper():
        return vowels < 0.2
    changes = sum(a.isupper() != b.isupper() for a, b in zip(segment, segment[1:])) / (len(segment) - 1)
    return vowels < 0.3 and changes >= 0.3


def names_a_secret(segment: str) -> bool:
    """Whether a path segment names a credential, so that the next segment holds one
    (``/reset-token/XYZ``, ``/api/key/XYZ``, ``/session/XYZ``)."""
    return bool(segment) and is_secret_parameter(segment.replace("-", "_"))


class GivenTemplate:
    """A template given by the user: ``/users/{name}/orders`` or ``POST /users/{name}``."""

    def __init__(self, text: str) -> None:
        method, _, path = text.strip().rpartition(" ")
        method = method.strip().upper()
        if not path.startswith("/") or (method and not re.fullmatch(r"[A-Z]+", method)):
            raise InvalidInput(f"--template: {text!r} is not a path template",
                               hint="write it as /users/{id}/orders or GET /users/{id} (a {name} matches one path segment)")
        self.method = method or None
        self.text = path
        pattern = ""
        pieces: list[str | int] = []
        labels: list[str] = []
        secret: list[bool] = []
        before = ""  # the path up to the placeholder
        for position, part in enumerate(re.split(r"(\{[^{}/]*\})", path)):
            if position % 2 == 0:
                pattern += re.escape(part)
                before += part
                if part:
                    pieces.append(part)
                continue
            label = part[1:-1]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", label):
                raise InvalidInput(f"--template {text!r}: {part} is not a placeholder",
                                   hint="a placeholder is a name in braces, e.g. {id} or {user}")
            pattern += r"([^/]+)"
            pieces.append(len(labels))
            labels.append(label)
            # {token}, or a placeholder after a segment named like a secret (/reset-token/{t}).
            secret.append(is_secret_parameter(label) or (before.endswith("/") and names_a_secret(before[:-1].rpartition("/")[2])))
            before += part
        self.pattern = re.compile(pattern)
        self.pieces = tuple(pieces)
        self.labels = tuple(labels)
        self.secret = tuple(secret)


class Templater:
    """Turns a request's method and target into its endpoint and its slots' values."""

    def __init__(self, given: Sequence[str] = (), max_shapes: int = 10_000) -> None:
        self._given = [GivenTemplate(text) for text in given]
        #: One object per endpoint (so that a caller may key by its id), for the first
        #: max_shapes endpoints: a log of ever new paths must not grow the memory.
        self._shapes: dict[Shape, Shape] = {}
        self._max_shapes = max_shapes
        self._cache: dict[tuple[str, str], tuple[Shape, tuple[str | None, ...]]] = {}
        self._skeletons: dict[str, _Skeleton] = {}

    def template(self, method: str, target: str) -> tuple[Shape, tuple[str | None, ...]]:
        key = (method, target)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        path, _, query = target.partition("?")
        path_part = (self._given_path(method, path) if self._given else None) or self._skeleton_path(path)
        pieces, slots, values = path_part
        names: list[str] = []
        if query:
            for pair in query.split("&"):
                name, _, value = pair.partition("=")
                if not name or name in names:
                    continue  # a repeated parameter (a[]=1&a[]=2) is one slot
                name = name if _NAME.fullmatch(name) else "{param}"
                if name in names:
                    continue
                names.append(name)
                slots.append(_query_slot(name))
                values.append(_query_value(name, value))
        shape = Shape(method, tuple(pieces), tuple(names), tuple(slots))
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

    def _given_path(self, method: str, path: str) -> tuple[list[str | int], list[Slot], list[str | None]] | None:
        for given in self._given:
            if given.method not in (None, method):
                continue
            match = given.pattern.fullmatch(path)
            if match is None:
                continue
            kinds = ["secret" if secret else classify(value) or "named" for value, secret in zip(match.groups(), given.secret)]
            values = [_kept(value, kind) for value, kind in zip(match.groups(), kinds)]
            slots = [_slot(label, kind if kind in ("token", "email", "secret") else "named", "path")
                     for label, kind in zip(given.labels, kinds)]
            return list(given.pieces), slots, values
        return None

    def _skeleton_path(self, path: str) -> tuple[list[str | int], list[Slot], list[str | None]]:
        """The path's template through its skeleton (its digits all written 0): a segment's kind
        depends only on its skeleton, so a path whose skeleton was seen, with the same literal
        text, has the same template; only its values are read (most paths with ids come this
        way, with no segment classified again)."""
        skeleton = path.translate(_DIGITS_TO_ZERO)
        known = self._skeletons.get(skeleton)
        segments = path.split("/")
        # The skeleton keeps every character but digits: only literal text holding digits can differ.
        if known is not None and all(segments[index][start:end] == text for index, start, end, text in known.literals):
            values = [None if slot.kind == "secret" else _kept(segments[index][start:end], slot.kind)
                      for slot, (index, start, end) in zip(known.slots, known.positions)]
            return list(known.pieces), list(known.slots), values
        pieces, slots, values, positions = self._auto_path(segments)
        if len(self._skeletons) >= CACHE_SIZE:
            self._skeletons.clear()
        self._skeletons[skeleton] = _Skeleton(tuple(pieces), tuple(slots), tuple(positions),
                                              _literal_ranges(segments, positions))
        return pieces, slots, values

    @staticmethod
    def _auto_path(segments: list[str]) -> tuple[list[str | int], list[Slot], list[str | None], list[tuple[int, int, int]]]:
        """Pieces, slots and values of a path (split at '/'), and where each slot's value is:
        (segment, start, end). A segment is one id, or dotted parts of which some are ids
        (``app.3f9a0c7be1.js``, ``17.json``)."""
        pieces: list[str | int] = []
        slots: list[Slot] = []
        values: list[str | None] = []
        positions: list[tuple[int, int, int]] = []
        literal = ""
        previous = ""
        for index, segment in enumerate(segments):
            if index:
                literal += "/"
            if segment and names_a_secret(previous) and not (_ROUTE_WORD.fullmatch(segment) and names_a_secret(segment)):
                # What follows a segment named like a secret (/reset-token/XYZ, /api/key/XYZ) is
                # one, whatever its length or shape: the whole segment, never kept.
                parts: list[tuple[str, str | None]] = [(segment, "secret")]
            elif segment.isdigit():
                parts = [(segment, "int")]
            elif len(segment) < 8 and "@" not in segment and "%" not in segment and "." not in segment:
                parts = [(segment, None)]  # too short for any id but a number
            else:
                kind = classify(segment)
                if kind is None and "." in segment:
                    parts = [(part, classify(part)) for part in segment.split(".")]
                else:
                    parts = [(segment, kind)]
            offset = 0
            for number, (part, kind) in enumerate(parts):
                if number:
                    literal += "."
                    offset += 1
                if kind is None:
                    literal += part
                else:
                    if literal:
                        pieces.append(literal)
                    literal = ""
                    pieces.append(len(slots))
                    slots.append(_slot(LABELS[kind], kind, "path"))
                    values.append(_kept(part, kind))
                    positions.append((index, offset, offset + len(part)))
                offset += len(part)
            previous = segment
        if literal:
            pieces.append(literal)
        return pieces, slots, values, positions


def _literal_ranges(segments: list[str], positions: list[tuple[int, int, int]]) -> tuple[tuple[int, int, int, str], ...]:
    """Each segment's text outside its slots that holds a digit, as (segment, start, end, text):
    what another path of the same skeleton may have otherwise."""
    taken: dict[int, list[tuple[int, int]]] = {}
    for index, start, end in positions:
        taken.setdefault(index, []).append((start, end))
    ranges = []
    for index, segment in enumerate(segments):
        start = 0
        for slot_start, slot_end in taken.get(index, []):
            if slot_start > start:
                ranges.append((index, start, slot_start, segment[start:slot_start]))
            start = slot_end
        if start < len(segment) or index not in taken:
            ranges.append((index, start, len(segment), segment[start:]))
    return tuple(found for found in ranges if any(character.isdigit() for character in found[3]))


class _Skeleton(NamedTuple):
    """A path template as :meth:`Templater._skeleton_path` remembers it."""

    pieces: tuple[str | int, ...]
    slots: tuple[Slot, ...]
    positions: tuple[tuple[int, int, int], ...]   # each slot's (segment, start, end)
    literals: tuple[tuple[int, int, int, str], ...]  # the text between, which must be equal


@lru_cache(maxsize=1024)
def _slot(label: str, kind: str, where: str) -> Slot:
    """One Slot object per distinct slot (a request's slots are compared, not rebuilt)."""
    return Slot(label, kind, where)


def _kept(value: str, kind: str | None) -> str | None:
    """The value as the plan may use it, or None when it must not leave the log."""
    if kind in ("token", "email", "secret") or len(value) > MAX_VALUE_LENGTH:
        return None
    if ("@" in value or "%40" in value) and has_email(value):
        return None
    return value


def _query_slot(name: str) -> Slot:
    return _slot(name, "secret" if is_secret_parameter(name) else "query", "query")


def _query_value(name: str, value: str) -> str | None:
    if is_secret_parameter(name):
        return None
    return _kept(value, classify(value))
