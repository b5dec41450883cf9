"""Secrets kept out of stored plans and reports: header values that carry credentials.

>>> redact_plan({"target": {"headers": {"Authorization": "Bearer x", "Accept": "*/*"}}, "scenarios": []})
{'target': {'headers': {'Authorization': '<redacted>', 'Accept': '*/*'}}, 'scenarios': []}
"""

from __future__ import annotations

import copy
from typing import Any

REDACTED = "<redacted>"
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"}
_SECRET_WORDS = ("token", "secret", "password", "apikey", "api-key", "session")


def is_secret_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in _SECRET_HEADERS or any(word in lowered for word in _SECRET_WORDS)


def _redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: (REDACTED if is_secret_header(name) else value) for name, value in headers.items()}


def redact_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """A copy of a plan (as a dict) with secret header values replaced."""
    redacted = copy.deepcopy(plan)
    target = redacted.get("target", {})
    if "headers" in target:
        target["headers"] = _redact_headers(target["headers"])
    for scenario in redacted.get("scenarios", []):
        for step in scenario.get("steps", []):
            if "headers" in step:
                step["headers"] = _redact_headers(step["headers"])
    return redacted
