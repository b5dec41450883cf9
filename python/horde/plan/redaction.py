"""Secrets kept out of everything Horde writes: the stored plan and run record, and through them
exports, reports, the dashboard; the names that metrics, the terminal and Prometheus show.

A secret is found two ways:

- **by name**: a header, a query field, a JSON or form body field, or a plan parameter whose name
  looks like a credential (``Authorization``, ``X-Auth``, ``Api_Key``, ``X-Access-Key``,
  ``access_token``, ``password``, ``session``...), and a query field holding a one-time
  credential (``code``, ``state``, ``nonce``, ``hash``); under a body field so named, an object or
  a list is a secret whole;
- **by where its value came from**: a plan parameter set through the environment
  (``HORDE_PARAM_NAME``, how a CI job passes a token) is a secret whatever its name, and so is
  one whose value went into a credential (``Cookie: "sid={{ params.c }}"``); each cookie of a
  ``Cookie`` header is a secret whatever its name (``PHPSESSID``);
- **in a feeder file**: the values of a feeder's fields named like a credential (a CSV column
  ``password``), which a target may echo back in what Horde keeps of its answers.

Each value found so is then replaced wherever it appears in the plan, not only where it was
found (a token fed into a header through a parameter, repeated in a path, a body or a URL):

>>> redact_plan({"target": {"headers": {"Authorization": "Bearer x", "Accept": "*/*"}}, "scenarios": []})
{'target': {'headers': {'Authorization': '<redacted>', 'Accept': '*/*'}}, 'scenarios': []}
>>> redact_url_query("http://h/items?access_token=abc123&page=2")
'http://h/items?access_token=<redacted>&page=2'

What names a secret is the engine's rule (crate horde-plan, ``secrets.rs``), the one it redacts
recorded exchanges by; this module asks it (:func:`is_secret_name`) rather than keep a copy:

>>> [is_secret_name(n) for n in ("X-Auth", "Api_Key", "X-Access-Key", "access_token", "Accept", "page")]
[True, True, True, True, False, False]
"""

from __future__ import annotations

import copy
import csv
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from horde._engine import is_secret_name, is_secret_query_field
from horde.plan.bounds import loads_bounded
from horde.plan.parameters import env_name

REDACTED = "<redacted>"

#: A secret value shorter than this is not searched for elsewhere: replacing every "1" or "on"
#: in a plan would destroy it, and so short a value is no credential worth the name.
MIN_VALUE_LENGTH = 4


#: Kept for callers that ask about headers; headers follow the general rule.
is_secret_header = is_secret_name


def redact_url_password(url: str) -> str:
    """The URL with the password of its ``user:password@`` part replaced.

    >>> redact_url_password("http://me:pw@127.0.0.1:8080/api")
    'http://me:<redacted>@127.0.0.1:8080/api'
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{hostport}"))


def is_secret_parameter(name: str) -> bool:
    """Whether a query field (or a form field, or a path segment naming what follows it) holds a
    credential: the rule for a run's URLs and for what ``horde profile`` reads from logs (the
    engine's, :func:`horde._engine.is_secret_query_field`: a credential's name, or a one-time
    credential's field such as an OAuth callback's ``code``).

    >>> [is_secret_parameter(n) for n in ("access_token", "sig", "Session", "code", "page", "q")]
    [True, True, True, True, False, False]
    """
    return is_secret_query_field(name)


def _query_secrets(query: str) -> list[str]:
    return [value for name, value in parse_qsl(query, keep_blank_values=True) if is_secret_parameter(name) and value]


def redact_url_query(url: str) -> str:
    """A URL or path whose query fields holding a credential (:func:`is_secret_parameter`) have
    their values replaced (the other fields, their order and the rest of the URL kept).

    >>> redact_url_query("/callback?code=4%2F0Ab&scope=email")
    '/callback?code=<redacted>&scope=email'
    """
    base, mark, query = url.partition("?")
    if not mark or not _query_secrets(query):
        return url
    fields = [
        (name, REDACTED if is_secret_parameter(name) and value else value)
        for name, value in parse_qsl(query, keep_blank_values=True)
    ]
    return base + "?" + urlencode(fields, safe="<>{}")


def _leaves(node: Any) -> Iterable[str]:
    """Every scalar (text or number) of a JSON value, at any depth."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _leaves(value)
    elif isinstance(node, list):
        for item in node:
            yield from _leaves(item)
    elif isinstance(node, (str, int, float)) and not isinstance(node, bool):
        yield str(node)


def _body_field_secrets(node: Any) -> Iterable[str]:
    """Values of fields named like credentials, at any depth of a JSON value: under such a field
    an object or a list is a secret whole (``{"credentials": {"user": "u", "key": "k"}}``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if is_secret_name(str(key)):
                yield from _leaves(value)
            else:
                yield from _body_field_secrets(value)
    elif isinstance(node, list):
        for item in node:
            yield from _body_field_secrets(item)


def _text_body_secrets(body: str) -> list[str]:
    """Secrets in a text body: a JSON document's credential fields, or a form's."""
    try:
        return list(_body_field_secrets(loads_bounded(body)))
    except ValueError:
        pass
    if "=" in body and "\n" not in body:
        return _query_secrets(body)
    return []


def _walk_steps(steps: Any) -> Iterable[dict[str, Any]]:
    """Every step dict at any depth (groups, branches, loops, ifs)."""
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        yield step
        for key in ("steps", "then", "else"):
            yield from _walk_steps(step.get(key))
        for branch in step.get("branches", []) if isinstance(step.get("branches"), list) else []:
            if isinstance(branch, dict):
                yield from _walk_steps(branch.get("steps"))


def _all_steps(plan: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    for scenario in plan.get("scenarios", []) if isinstance(plan.get("scenarios"), list) else []:
        if isinstance(scenario, dict):
            for part in ("setup", "steps", "teardown"):
                yield from _walk_steps(scenario.get(part))


def _headers_of(plan: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    target = plan.get("target")
    if isinstance(target, dict) and isinstance(target.get("headers"), dict):
        yield target["headers"]
    for scenario in plan.get("scenarios", []) if isinstance(plan.get("scenarios"), list) else []:
        if isinstance(scenario, dict) and isinstance(scenario.get("headers"), dict):
            yield scenario["headers"]
    for step in _all_steps(plan):
        if isinstance(step.get("headers"), dict):
            yield step["headers"]


def _is_secret_parameter(name: str, value: object, environ: Mapping[str, str]) -> bool:
    """A parameter named like a credential, or text set through the environment (numbers and
    booleans from the environment are levels and switches, not credentials)."""
    return is_secret_name(name) or (isinstance(value, str) and environ.get(env_name(name)) is not None)


def redact_run_parameters(parameters: Mapping[str, Any], secrets: frozenset[str]) -> Any:
    """The parameters a run is recorded with (the flags, and ``params``: what ``-p`` gave), with
    ``-p`` values named like credentials and every secret value replaced."""
    shown = dict(parameters)
    if isinstance(shown.get("params"), dict):
        shown["params"] = {
            name: (REDACTED if is_secret_name(str(name)) else value) for name, value in shown["params"].items()
        }
    if isinstance(shown.get("base_url"), str):
        shown["base_url"] = redact_url_query(redact_url_password(shown["base_url"]))
    return redact_values(shown, secrets)


def secret_names(plan: Mapping[str, Any], secrets: frozenset[str]) -> list[tuple[str, str]]:
    """Names (the plan's, its scenarios', its steps') that hold a secret value, with where they
    are: names are written to the terminal, the store's rows and Prometheus' labels as they are.

    A value found only in a feeder file does not count: among thousands of rows' passwords one
    may be a word a name holds ("admin"), and the name is the plan's, not the row's."""
    fed = _feeder_secrets(plan)
    if fed:
        secrets = secrets - (fed - secret_values(plan, feeders=False))
    if not secrets:
        return []
    found = [("name", plan.get("name"))]
    for index, scenario in enumerate(plan.get("scenarios", []) if isinstance(plan.get("scenarios"), list) else []):
        if not isinstance(scenario, dict):
            continue
        found.append((f"scenarios[{index}].name", scenario.get("name")))
        # Located by the list the step is in: the step's own name must not be printed.
        found.extend(
            (f"scenarios[{index}].{part}", step.get("name"))
            for part in ("setup", "steps", "teardown")
            for step in _walk_steps(scenario.get(part))
        )
    return [
        (where, str(name))
        for where, name in found
        if isinstance(name, str) and any(secret in name for secret in secrets)
    ]


#: What parts a credential: "Bearer T", "sid=T; lang=en", "Digest username=u, response=T".
_CREDENTIAL_SEPARATORS = re.compile(r"[\s;,=:\"]+")


def secret_values(
    plan: Mapping[str, Any], *, environ: Mapping[str, str] | None = None, feeders: bool = True
) -> frozenset[str]:
    """Every secret value a plan (as a dict) holds, found by name or by where it came from, for
    :func:`redact_values` to replace wherever it appears; with ``feeders``, the secret fields'
    values of its feeder files too (:func:`feeder_secret_values`).

    >>> cookie = {"Cookie": "sid=c-4567; lang=en"}
    >>> sorted(secret_values({"parameters": {"c": "c-4567"}, "target": {"headers": cookie}}, environ={}))
    ['c-4567', 'sid=c-4567; lang=en']
    """
    environ = os.environ if environ is None else environ
    found: list[str] = []
    parameters = plan.get("parameters")
    for name, value in parameters.items() if isinstance(parameters, dict) else []:
        if _is_secret_parameter(str(name), value, environ) and not isinstance(value, bool):
            found.append(str(value))
    for headers in _headers_of(plan):
        for name, value in headers.items():
            if is_secret_name(str(name)) and isinstance(value, str):
                found.append(value)
                if str(name).lower() == "cookie":
                    # Every cookie carries the session, whatever its name ("PHPSESSID", "_s").
                    found.extend(cookie.partition("=")[2].strip() for cookie in value.split(";"))
                elif "{{" not in value:
                    # "Bearer TOKEN", "Basic CREDENTIALS": the credential alone may appear
                    # elsewhere (not the words of a template: "Bearer {{ token }}" holds none).
                    found.extend(value.split()[1:])
    target = plan.get("target")
    urls = [target.get("base_url")] if isinstance(target, dict) else []
    for step in _all_steps(plan):
        urls.append(step.get("path"))
        if isinstance(step.get("body"), str):
            found.extend(_text_body_secrets(step["body"]))
        if step.get("json") is not None:
            found.extend(_body_field_secrets(step["json"]))
    for url in urls:
        if isinstance(url, str):
            found.extend(_query_secrets(url.partition("?")[2]))
            try:
                password = urlsplit(url).password
            except ValueError:
                password = None
            if password:
                found.append(password)
    # A parameter whose value went into a credential is one, whatever its name: `-p c=...`
    # feeding `Cookie: "sid={{ params.c }}"` is substituted before this sees the plan.
    pieces = {piece for value in found for piece in (value, *_CREDENTIAL_SEPARATORS.split(value))}
    for value in parameters.values() if isinstance(parameters, dict) else []:
        if not isinstance(value, bool) and str(value) in pieces:
            found.append(str(value))
    kept = frozenset(value for value in found if len(value) >= MIN_VALUE_LENGTH and "{{" not in value)
    return (kept | _feeder_secrets(plan)) if feeders else kept


# -- Values a feeder file holds ----------------------------------------------------------------
# A feeder's rows reach the target (a login's password) and the target may quote them back: in a
# failed check's details ("body does not contain ... (body "`pw-1` is not valid")"), a status's.
# The engine's VUs redact the row they hold from recorded exchanges and SQL errors; the other
# error details are redacted here, by value, before anything stores or shows them.

#: The most secret values read from one feeder file: a set of this many short texts holds about
#: a hundred MB. Rows past it are not searched for (a feeder of users rarely has as many).
MAX_FEEDER_SECRETS = 1_000_000


def feeder_secret_values(path: str, format: str) -> frozenset[str]:
    """The values of a feeder file's fields named like a credential (:func:`is_secret_name`: a
    CSV column ``password``, a JSONL key ``api_key``, an object under ``credentials`` whole); an
    empty set when the file cannot be read (a cluster's generators may hold files this machine
    does not). A CSV file without such a column is read no further than its header row."""
    try:
        status = os.stat(path)
        return _feeder_file_secrets(path, format, status.st_size, status.st_mtime_ns)
    except OSError:
        return frozenset()


@functools.lru_cache(maxsize=16)
def _feeder_file_secrets(path: str, format: str, size: int, mtime_ns: int) -> frozenset[str]:
    # Keyed by size and modification time: the file read again only when it changed.
    found: set[str] = set()
    with open(path, encoding="utf-8-sig", newline="") as file:
        try:
            if format == "csv":
                columns: list[int] | None = None
                for record in csv.reader(file):
                    if not record or record == [""]:
                        continue
                    if columns is None:
                        columns = [index for index, name in enumerate(record) if is_secret_name(name.strip())]
                        if not columns:
                            break
                        continue
                    found.update(record[index] for index in columns if index < len(record))
                    if len(found) >= MAX_FEEDER_SECRETS:
                        break
            else:
                for line in file:
                    if not line.strip():
                        continue
                    try:
                        found.update(_body_field_secrets(loads_bounded(line)))
                    except ValueError:
                        continue  # the plan's check reports a bad row
                    if len(found) >= MAX_FEEDER_SECRETS:
                        break
        except (UnicodeDecodeError, csv.Error):
            pass  # a bad row past those the plan's check reads: the rows before it still count
    return frozenset(value for value in found if len(value) >= MIN_VALUE_LENGTH)


def _feeder_secrets(plan: Mapping[str, Any]) -> frozenset[str]:
    """The secret values of every feeder file of the plan's scenarios."""
    found: frozenset[str] = frozenset()
    for scenario in plan.get("scenarios", []) if isinstance(plan.get("scenarios"), list) else []:
        feeders = scenario.get("feeders") if isinstance(scenario, dict) else None
        for feeder in feeders if isinstance(feeders, list) else []:
            if isinstance(feeder, dict) and isinstance(feeder.get("path"), str):
                found |= feeder_secret_values(feeder["path"], str(feeder.get("format") or "csv"))
    return found


#: Above this many secret values a text is searched by lookups in a set rather than through one
#: regular expression, whose alternatives Python's engine tries one after another at each place.
_ALTERNATION_LIMIT = 256


class _SecretFinder:
    """Replaces the secret values in a text: longer secrets first at each place, so one that
    contains another goes whole; built once for a set of secrets (:func:`_finder`)."""

    def __init__(self, secrets: frozenset[str]) -> None:
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in sorted(secrets, key=len, reverse=True)))
            if len(secrets) <= _ALTERNATION_LIMIT
            else None
        )
        self._secrets = secrets
        self._lengths = sorted({len(s) for s in secrets}, reverse=True)

    def sub(self, text: str) -> str:
        if self._pattern is not None:
            return self._pattern.sub(REDACTED, text)
        if len(text) < self._lengths[-1]:
            return text
        # Each place tried with each length a secret has: a few dozen set lookups a character.
        out: list[str] = []
        kept_from = index = 0
        while index < len(text):
            length = next(
                (
                    length
                    for length in self._lengths
                    if index + length <= len(text) and text[index : index + length] in self._secrets
                ),
                0,
            )
            if length:
                out.append(text[kept_from:index])
                out.append(REDACTED)
                index += length
                kept_from = index
            else:
                index += 1
        out.append(text[kept_from:])
        return "".join(out)


@functools.lru_cache(maxsize=4)
def _finder(secrets: frozenset[str]) -> _SecretFinder:
    # The conductor redacts each second's error details with the same set: built once. Few are
    # kept: a set may hold a feeder's million passwords.
    return _SecretFinder(secrets)


def redact_values(data: Any, secrets: frozenset[str]) -> Any:
    """A copy of ``data`` (JSON-like) with every occurrence of a secret value in its strings, keys
    included, replaced; longer secrets first, so one that contains another goes whole."""
    if not secrets:
        return copy.deepcopy(data)
    finder = _finder(secrets)

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return finder.sub(node)
        if isinstance(node, dict):
            return {walk(key) if isinstance(key, str) else key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(data)


def _redact_headers(headers: dict[str, Any]) -> dict[str, Any]:
    return {name: (REDACTED if is_secret_name(str(name)) else value) for name, value in headers.items()}


def _redact_body_fields(node: Any) -> Any:
    """A JSON value with each field named like a credential replaced, whatever it holds (an
    object or a list under ``credentials`` goes whole)."""
    if isinstance(node, dict):
        return {
            key: (REDACTED if is_secret_name(str(key)) else _redact_body_fields(value)) for key, value in node.items()
        }
    if isinstance(node, list):
        return [_redact_body_fields(item) for item in node]
    return node


def redact_plan(plan: dict[str, Any], *, secrets: frozenset[str] | None = None) -> dict[str, Any]:
    """A copy of a plan (as a dict) fit to be stored or shown: credential headers, query fields,
    body fields and parameters replaced by name, a password in a URL replaced, then every secret
    value (``secrets``, by default :func:`secret_values` of the plan) replaced wherever it is."""
    secrets = secret_values(plan) if secrets is None else secrets
    redacted = copy.deepcopy(plan)
    for headers in _headers_of(redacted):
        headers.update(_redact_headers(headers))
    target = redacted.get("target")
    if isinstance(target, dict) and isinstance(target.get("base_url"), str):
        target["base_url"] = redact_url_query(redact_url_password(target["base_url"]))
    for step in _all_steps(redacted):
        if isinstance(step.get("path"), str):
            step["path"] = redact_url_query(step["path"])
        if step.get("json") is not None:
            step["json"] = _redact_body_fields(step["json"])
    parameters = redacted.get("parameters")
    if isinstance(parameters, dict):
        redacted["parameters"] = {
            name: (REDACTED if _is_secret_parameter(str(name), value, os.environ) else value)
            for name, value in parameters.items()
        }
    result: dict[str, Any] = redact_values(redacted, secrets)
    return result


# -- Values taken from production logs (`horde profile`) --------------------------------------
# A log carries what users sent: tokens in query strings, e-mail addresses, session cookies.
# These rules decide what of it may reach a written plan, profile or page.

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
#: A `name=value` pair of a query string or a cookie header.
_PAIR = re.compile(r"([A-Za-z0-9_.-]+)=([^&;\s\"']*)")


def has_email(text: str) -> bool:
    """Whether ``text`` holds an e-mail address (also percent-encoded: ``a%40b.org``)."""
    return _EMAIL.search(text) is not None


def redact_text(text: str) -> str:
    """``text`` (a log line shown to a person) with e-mail addresses and the values of secret
    ``name=value`` pairs (query fields, cookies) replaced.

    >>> redact_text('GET /a?token=abc&page=2 "sid=42; lang=en" bob@example.org')
    'GET /a?token=<redacted>&page=2 "sid=<redacted>; lang=en" <redacted>'
    """

    def pair(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{name}={REDACTED}" if is_secret_parameter(name) else match.group(0)

    return _PAIR.sub(pair, _EMAIL.sub(REDACTED, text))


# -- Exchanges shown by `horde run --debug` and `horde try` -----------------------------------
# The engine redacts each recorded exchange before it leaves it (credential headers and query
# fields by name, the values of the VU's variables and the plan's parameters named like a
# credential). What is shown is redacted once more here, with what only the control plane knows:
# the plan's secret values (parameters set through the environment too), and the credential
# fields of JSON and form bodies, whose values are then redacted in every later exchange too.

#: The exchange's texts that are redacted.
_EXCHANGE_TEXTS = ("request", "request_body", "response", "response_body", "detail")


def _redact_head(head: str) -> str:
    """An HTTP head: its first line's query fields and every header named like a credential."""
    lines = head.split("\r\n") if "\r\n" in head else head.split("\n")
    if lines:
        method, space, rest = lines[0].partition(" ")
        target, space2, version = rest.partition(" ")
        if space and "?" in target:
            lines[0] = f"{method} {redact_url_query(target)}{space2}{version}"
    for index, line in enumerate(lines[1:], start=1):
        name, colon, _ = line.partition(":")
        if colon and is_secret_name(name.strip()):
            lines[index] = f"{name}: {REDACTED}"
    return "\n".join(lines)


def _redact_body(body: str) -> str:
    """A body's JSON or form fields named like a credential (a body cut short is left as the
    secret values redact it)."""
    try:
        document = loads_bounded(body)
    except ValueError:
        return redact_text(body) if "=" in body and "\n" not in body else body
    redacted = _redact_body_fields(document)
    # Written again only when a field was redacted: otherwise the body shows as it was sent.
    return json.dumps(redacted, ensure_ascii=False) if redacted != document else body


def redact_exchange(exchange: Mapping[str, Any], secrets: set[str]) -> dict[str, Any]:
    """A copy of a recorded exchange fit to be shown: heads, bodies and variables redacted by
    name, then every value of ``secrets`` replaced. ``secrets`` (the plan's :func:`secret_values`
    to begin with) is added to: the credential fields found in this exchange's bodies, so that a
    token a login returns is redacted in the exchanges after it.

    >>> shown = redact_exchange({"transport": "http", "request": "GET /?token=abcd HTTP/1.1\\nX-Auth: abcd",
    ...                          "response_body": '{"session": "s-12345"}', "vars": [], "checks": []}, set())
    >>> shown["request"], shown["response_body"]
    ('GET /?token=<redacted> HTTP/1.1\\nX-Auth: <redacted>', '{"session": "<redacted>"}')
    """
    for part in ("request_body", "response_body"):
        text = exchange.get(part)
        if isinstance(text, str) and text:
            secrets.update(value for value in _text_body_secrets(text) if len(value) >= MIN_VALUE_LENGTH)
    shown = dict(copy.deepcopy(exchange))
    if shown.get("transport") == "http":
        for part in ("request", "response"):
            if isinstance(shown.get(part), str):
                shown[part] = _redact_head(shown[part])
        for part in ("request_body", "response_body"):
            if isinstance(shown.get(part), str) and shown[part]:
                shown[part] = _redact_body(shown[part])
    shown["vars"] = [
        {**var, "value": REDACTED} if is_secret_name(str(var.get("name"))) and var.get("value") is not None else var
        for var in shown.get("vars") or []
    ]
    frozen = frozenset(secret for secret in secrets if len(secret) >= MIN_VALUE_LENGTH)
    for part in _EXCHANGE_TEXTS:
        if isinstance(shown.get(part), str):
            shown[part] = redact_values(shown[part], frozen)
    shown["checks"] = redact_values(shown.get("checks") or [], frozen)
    shown["vars"] = redact_values(shown["vars"], frozen)
    return shown
