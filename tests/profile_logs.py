"""Access logs with known answers, written for the `horde profile` tests (tests/test_profile*.py)."""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass
from pathlib import Path

#: 2024-03-01 10:00:00 UTC: the logs' first second.
T0 = 1709287200


def clf(epoch_s: float, zone: str = "+0000") -> str:
    """The common log format's time for ``epoch_s`` (UTC, written with ``zone``)."""
    return time.strftime("%d/%b/%Y:%H:%M:%S ", time.gmtime(epoch_s)) + zone


@dataclass(frozen=True)
class Hit:
    """One request of a log: when, who, what, and how long it took."""

    t: float
    method: str
    target: str
    status: int = 200
    seconds: float | None = 0.010
    client: str = "10.0.0.1"
    agent: str = "Mozilla/5.0"
    cookie: str | None = None


def combined_line(hit: Hit, *, nginx_times: bool = True) -> str:
    """A combined-format line; with ``nginx_times`` nginx's ``$request_time
    $upstream_response_time`` after the agent, and the cookie as a quoted field after them."""
    line = f'{hit.client} - - [{clf(hit.t)}] "{hit.method} {hit.target} HTTP/1.1" {hit.status} 512 "-" "{hit.agent}"'
    if nginx_times and hit.seconds is not None:
        line += f" {hit.seconds:.3f} {hit.seconds:.3f}"
    if hit.cookie is not None:
        line += f' "{hit.cookie}"'
    return line


def json_line(hit: Hit) -> str:
    data: dict[str, object] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(hit.t)) + f".{int(hit.t % 1 * 1000):03d}Z",
        "method": hit.method,
        "uri": hit.target,
        "status": hit.status,
        "remote_addr": hit.client,
        "http_user_agent": hit.agent,
    }
    if hit.seconds is not None:
        data["duration_ms"] = round(hit.seconds * 1000, 3)
    if hit.cookie is not None:
        data["http_cookie"] = hit.cookie
    return json.dumps(data)


def write_log(path: Path, lines: list[str], *, gzipped: bool = False) -> Path:
    text = "".join(line + "\n" for line in lines)
    if gzipped:
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
