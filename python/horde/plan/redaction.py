"""Secrets kept out of stored plans and reports: header values that carry credentials.

>>> redact_plan({"target": {"headers": {"Authorization": "Bearer x", "Accept": "*/*"}}, "scenarios": []})
{'target': {'headers': {'Authorization': '<redacted>', 'Accept': '*/*'}}, 'scenarios': []}
"""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"}
_SECRET_WORDS = ("token", "secret", "password", "apikey", "api-key", "session")


def is_secret_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or any(word in lowered for word in _SECRET_WORDS)


def _redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: (REDACTED if is_secret_header(name) else value) for name, value in headers.items()}


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


def redact_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """A copy of a plan (as a dict) with secret header values (and a password in the base URL)
    replaced."""
    redacted = copy.deepcopy(plan)
    target = redacted.get("target", {})
    if isinstance(target.get("base_url"), str):
        target["base_url"] = redact_url_password(target["base_url"])
    if "headers" in target:
        target["headers"] = _redact_headers(target["headers"])
    for scenario in redacted.get("scenarios", []):
        if isinstance(scenario.get("headers"), dict):
            scenario["headers"] = _redact_headers(scenario["headers"])
        for part in ("setup", "steps", "teardown"):
            _redact_steps(scenario.get(part, []))
    return redacted


def _redact_steps(steps: list[Any]) -> None:
    """Redacts the headers of every step, at any depth (groups, branches, loops, ifs)."""
    for step in steps:
        if not isinstance(step, dict):
            continue
        if isinstance(step.get("headers"), dict):
            step["headers"] = _redact_headers(step["headers"])
        for key in ("steps", "then", "else"):
            if isinstance(step.get(key), list):
                _redact_steps(step[key])
        for branch in step.get("branches", []) if isinstance(step.get("branches"), list) else []:
            if isinstance(branch, dict) and isinstance(branch.get("steps"), list):
                _redact_steps(branch["steps"])


# -- Values taken from production logs (`horde profile`) --------------------------------------
# A log carries what users sent: tokens in query strings, e-mail addresses, session cookies.
# These rules decide what of it may reach a written plan, profile or page.

#: Query parameters named like these hold credentials even without a secret header's words.
_SECRET_PARAMETERS = {"key", "sig", "signature", "auth", "code", "jwt", "sid", "pass", "pwd", "otp",
                      "credential", "credentials", "hash", "nonce", "state"}
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
#: A `name=value` pair of a query string or a cookie header.
_PAIR = re.compile(r"([A-Za-z0-9_.-]+)=([^&;\s\"']*)")


def is_secret_parameter(name: str) -> bool:
    """Whether a query parameter (or a form field, a path segment naming what follows it) holds a
    credential by its name.

    >>> [is_secret_parameter(n) for n in ("access_token", "sig", "Session", "page", "q")]
    [True, True, True, False, False]
    """
    lowered = name.lower()
    return is_secret_header(lowered) or lowered in _SECRET_PARAMETERS or lowered.endswith(("_key", "-key", "_token"))


def has_email(text: str) -> bool:
    """Whether ``text`` holds an e-mail address (also percent-encoded: ``a%40b.org``)."""
    return _EMAIL.search(text) is not None


def redact_text(text: str) -> str:
    """``text`` (a log line shown to a person) with e-mail addresses and the values of secret
    ``name=value`` pairs (query parameters, cookies) replaced.

    >>> redact_text('GET /a?token=abc&page=2 "sid=42; lang=en" bob@example.org')
    'GET /a?token=<redacted>&page=2 "sid=<redacted>; lang=en" <redacted>'
    """
    def pair(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{name}={REDACTED}" if is_secret_parameter(name) else match.group(0)

    return _PAIR.sub(pair, _EMAIL.sub(REDACTED, text))

