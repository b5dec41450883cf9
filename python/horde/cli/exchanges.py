"""Recorded exchanges as the terminal shows them (``horde run --debug N``, ``horde try``), in the
manner of ``curl -v`` and k6's ``--http-debug``: ``>`` lines went out, ``<`` lines came back.

Every exchange is redacted before it is printed (:func:`horde.plan.redaction.redact_exchange`:
the engine has already redacted it once); the secrets a printer learns from one exchange (a
token in a login's answer) are redacted in every later one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console

from horde.plan.redaction import redact_exchange

#: How much of a body the engine records (``crates/horde-engine/src/exchange.rs``).
BODY_PREFIX_BYTES = 2048


def _lines(prefix: str, text: str) -> list[str]:
    return [f"{prefix} {line}".rstrip() for line in text.replace("\r\n", "\n").split("\n")]


def exchange_lines(exchange: Mapping[str, Any]) -> list[str]:
    """One (already redacted) exchange as lines of text. A message step's (``transport``
    ``message``) ``>`` lines are the connection it opened and the messages it sent, its ``<``
    lines the messages it received.

    >>> lines = exchange_lines({"scenario": "s", "step": "get", "phase": "steps", "transport": "http", "vu": 0,
    ...     "iteration": 0, "request": "GET / HTTP/1.1\\r\\nHost: h", "request_body": "", "request_body_bytes": 0,
    ...     "response": "HTTP/1.1 200 OK\\r\\nContent-Length: 3", "response_body": "ok\\n",
    ...     "response_body_truncated": False, "status": 200, "latency_us": 1500, "outcome": "ok", "detail": None,
    ...     "checks": [{"check": "status in [200]", "passed": True, "why": None}], "vars": []})
    >>> print("\\n".join(lines))
    ── s › get  (steps, VU 0, iteration 0)
    > GET / HTTP/1.1
    > Host: h
    < HTTP/1.1 200 OK
    < Content-Length: 3
    <
    < ok
      ok in 1.50 ms
      ✓ status in [200]
    """
    title = f"── {exchange['scenario']} › {exchange['step']}  ({exchange['phase']}, VU {exchange['vu']}, iteration {exchange['iteration']})"
    lines = [title]
    request, body = exchange.get("request") or "", exchange.get("request_body") or ""
    # A step whose template failed was not sent (a `sql` step shows the statement it would run).
    sent = exchange.get("outcome") != "template_failed" and bool(request)
    if request:
        lines += _lines(">", request)
        if body:
            lines.append(">")
            lines += _lines(">", body)
            if exchange.get("request_body_bytes", 0) > BODY_PREFIX_BYTES:
                lines.append(f"> … (cut at 2 KiB of {exchange['request_body_bytes']:,} bytes)")
    response, body = exchange.get("response") or "", exchange.get("response_body") or ""
    if response:
        lines += _lines("<", response)
        if body:
            lines.append("<")
            lines += _lines("<", body.rstrip("\n"))
            if exchange.get("response_body_truncated"):
                lines.append("< … (cut at 2 KiB)")
    elif exchange.get("transport") == "message":
        # A message step that sends has no answer to wait for; one that waited and got nothing
        # says so in its outcome (lost, timeout).
        pass
    elif sent:
        lines.append("< (no response)")
    else:
        lines.append("  (not sent)")
    outcome = str(exchange.get("outcome") or "ok")
    # A message step that only receives sent nothing and still took its time.
    timing = f" in {exchange['latency_us'] / 1000:.2f} ms" if sent or exchange.get("transport") == "message" else ""
    lines.append(f"  {outcome}{timing}" + (f" — {exchange['detail']}" if exchange.get("detail") else ""))
    for check in exchange.get("checks") or []:
        mark = "✓" if check["passed"] else "✗"
        lines.append(f"  {mark} {check['check']}" + (f" — {check['why']}" if check.get("why") else ""))
    for var in exchange.get("vars") or []:
        value = var.get("value")
        lines.append(f"  {var['name']} = {value}" if value is not None else f"  {var['name']} is not set")
    return lines


class ExchangePrinter:
    """Prints recorded exchanges as they come, redacted; ``secrets`` are the plan's secret
    values (:func:`horde.plan.redaction.secret_values`), added to as exchanges show more."""

    def __init__(self, console: Console, secrets: Iterable[str]) -> None:
        self.console = console
        self.secrets = set(secrets)
        self.shown: list[dict[str, Any]] = []

    def __call__(self, exchanges: Iterable[Mapping[str, Any]]) -> None:
        for exchange in exchanges:
            shown = redact_exchange(exchange, self.secrets)
            self.shown.append(shown)
            for line in exchange_lines(shown):
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
