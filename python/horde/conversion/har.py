"""A HAR recording (HAR 1.2, what browsers' developer tools and proxies export) converted to a
Horde plan: one scenario whose steps are the recorded requests in order.

- **Think times**: the gap between one kept request's end (``startedDateTime`` + ``time``) and the
  next one's start becomes the first one's constant think time (none where they overlapped).
- **Static assets** (images, CSS, scripts, fonts, media: by the response's MIME type or the
  path's extension) are left out by rule, a finding each, unless ``keep_static``.
- **Another host** than the first kept request's: left out (a plan has one target), a finding each.
- **Secrets never reach the plan.** An ``Authorization`` header, or any header or query field
  named like a credential (:mod:`horde.conversion.credentials`), whose value no earlier
  response gave, becomes a plan parameter with an empty default that the user gives (``-p`` or
  ``HORDE_PARAM_NAME``); a cookie no earlier response set, the same, in the scenario's ``Cookie``
  header; a cookie an earlier response set is left to the VU's cookie jar.
- **Values reused**: a value of a later request (a query field, a path segment, a header, a JSON
  body field) that an earlier response gave, as a JSON field or a whole header (``Location``),
  becomes an extraction on that response's step and a template in the later request.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from horde.conversion.credentials import Credentials, identifier, leaves
from horde.conversion.findings import Conversion, Outcome
from horde.conversion.tank import literal
from horde.errors import InvalidInput
from horde.plan import METHODS
from horde.plan.redaction import redact_url_query

STATIC_MIME = re.compile(
    r"^(image/|font/|audio/|video/|text/css|(text|application)/(x-)?javascript|application/(x-)?font)"
)
STATIC_EXTENSIONS = (
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".avif", ".bmp", ".css", ".js", ".mjs", ".map",
    ".woff", ".woff2", ".ttf", ".otf", ".eot", ".mp4", ".webm", ".mp3", ".ogg",
)  # fmt: skip
#: Chromium's ``_resourceType`` of static assets.
STATIC_KINDS = ("image", "stylesheet", "script", "font", "media", "manifest")
#: Headers the engine writes itself (or the target decides), and HTTP/2's pseudo-headers.
_SKIPPED_HEADERS = ("host", "content-length", "connection", "accept-encoding", "cookie", "keep-alive", "te", "upgrade")
#: Values shorter than this are not looked for in earlier responses (a "1" is everywhere).
MIN_REUSED_LENGTH = 4
#: A header's name as HTTP allows it (HTTP/2's pseudo-headers, ":authority", are not).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def convert_har(path: Path, *, keep_static: bool = False) -> Conversion:
    """The Horde plan of the HAR recording at ``path``."""
    label = path.name
    try:
        document = json.loads(path.read_bytes())
    except OSError as error:
        raise InvalidInput(f"cannot read {path}: {error.strerror or error}", hint="give a .har file") from None
    except (ValueError, RecursionError) as error:
        raise InvalidInput(
            f"{label}: not JSON ({error})", hint="a HAR is JSON: export it again from the browser"
        ) from None
    entries = document.get("log", {}).get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InvalidInput(
            f"{label}: log.entries: no requests", hint="a HAR 1.2 file holds log.entries, one per request"
        )
    conversion = Conversion(path, "har", {"version": 1, "name": path.stem or "har"})
    return _Har(conversion, label, keep_static).convert(entries)


def _field(entry: Any, where: str, *keys: str) -> Any:
    node = entry
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            raise InvalidInput(
                f"{where}: no {'.'.join(keys)}", hint="each HAR entry has request.method and request.url"
            )
        node = node[key]
    return node


def _dict(node: Any) -> dict[str, Any]:
    """A part of the recording that should be an object, or an empty one (a field left out)."""
    return node if isinstance(node, dict) else {}


def _pairs(node: Any) -> list[tuple[str, str]]:
    if not isinstance(node, list):
        return []
    return [
        (str(item["name"]), str(item.get("value", "")))
        for item in node
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


def _started_ms(text: Any, where: str) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp() * 1000
    except ValueError:
        raise InvalidInput(
            f"{where}: startedDateTime '{text}' is not an ISO 8601 time", hint="e.g. 2026-03-01T10:00:00.000Z"
        ) from None


class _Har:
    def __init__(self, conversion: Conversion, label: str, keep_static: bool) -> None:
        self.conversion = conversion
        self.label = label
        self.keep_static = keep_static
        self.variables: set[str] = set()
        self.credentials = Credentials(self.variables)

    def where(self, index: int) -> str:
        return f"{self.label}: log.entries[{index}]"

    def convert(self, entries: list[Any]) -> Conversion:
        kept: list[tuple[int, Any]] = []
        candidates: list[tuple[int, Any, str, str, bool]] = []
        for index, entry in enumerate(entries):
            where = self.where(index)
            method = str(_field(entry, where, "request", "method")).upper()
            url = str(_field(entry, where, "request", "url"))
            try:
                parts = urlsplit(url)
            except ValueError:
                parts = None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                self.conversion.add(
                    Outcome.NOT_CONVERTED,
                    where,
                    f"{method} {redact_url_query(url)[:80]}",
                    "not an http(s) URL: left out",
                    ("scenarios", 0, "steps"),
                )
                continue
            mime = str(_dict(_dict(entry.get("response")).get("content")).get("mimeType") or "").lower()
            # Chromium says what the page used the response as (``_resourceType``), whatever its MIME type.
            kind = str(entry.get("_resourceType") or "")
            static = STATIC_MIME.match(mime) or parts.path.lower().endswith(STATIC_EXTENSIONS) or kind in STATIC_KINDS
            if not self.keep_static and static:
                self.conversion.add(
                    Outcome.APPROXIMATED, where, f"{method} {parts.path[:80]} ({mime or 'by extension'})",
                    "a static asset, left out by rule (a browser caches them); --keep-static keeps it", ("scenarios", 0, "steps"),
                )  # fmt: skip
                continue
            if method not in METHODS:
                self.conversion.add(
                    Outcome.NOT_CONVERTED,
                    where,
                    f"{method} {parts.path[:80]}",
                    f"Horde sends {', '.join(METHODS)}: left out",
                    ("scenarios", 0, "steps"),
                )
                continue
            here = f"{parts.scheme}://{parts.netloc}"
            page = kind == "document" or mime.startswith("text/html")
            candidates.append((index, entry, here, f"{method} {redact_url_query(url)[:80]}", page))
        # The target: the first page's host (the site visited), else the host most requests went to
        # (not an analytics call that happened to come first).
        hosts = Counter(here for _, _, here, _, _ in candidates)
        pages = [here for _, _, here, _, page in candidates if page]
        origin = pages[0] if pages else (hosts.most_common(1)[0][0] if hosts else None)
        for index, entry, here, element, _ in candidates:
            if here != origin:
                self.conversion.add(
                    Outcome.NOT_CONVERTED, self.where(index), element,
                    f"another host than {origin}: a plan has one target; left out", ("scenarios", 0, "steps"),
                )  # fmt: skip
                continue
            kept.append((index, entry))
        if origin is None or not kept:
            raise InvalidInput(
                f"{self.label}: no request left to convert",
                hint="--keep-static keeps static assets; check the recording holds http(s) requests",
            )
        self.conversion.plan["target"] = {"base_url": origin}
        self.conversion.add(
            Outcome.CONVERTED, self.where(kept[0][0]), f"origin {origin}", "target.base_url", ("target",)
        )
        steps = self.steps(kept)
        scenario: dict[str, Any] = {"name": "recording"}
        common = self.common_headers(steps)
        if common:
            scenario["headers"] = common
        cookies = self.cookie_header()
        if cookies:
            scenario.setdefault("headers", {})["Cookie"] = cookies
        scenario["steps"] = steps
        scenario["workload"] = {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 60, "vus": 1}]}
        self.conversion.add(
            Outcome.CONVERTED, self.label, "the recording's user", "one VU looping the recorded visit for 60 s: set the stages you need",
            ("scenarios", 0, "workload"),
        )  # fmt: skip
        plan = self.conversion.plan
        if self.credentials.parameters:
            plan["parameters"] = dict(self.credentials.parameters)
        self.conversion.plan = {key: plan[key] for key in ("version", "name", "parameters", "target") if key in plan}
        self.conversion.plan["scenarios"] = [scenario]
        return self.conversion

    def steps(self, kept: list[tuple[int, Any]]) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = []
        names: Counter[str] = Counter()
        #: Values earlier responses gave: value -> (step index, extractor builder, variable name or None).
        offered: list[tuple[int, int, Any]] = []
        self.jar: set[str] = set()
        self.outside_cookies: dict[str, str] = {}
        for position, (index, entry) in enumerate(kept):
            where = self.where(index)
            request, response = entry["request"], _dict(entry.get("response"))
            parts = urlsplit(str(request["url"]))
            method = str(request["method"]).upper()
            target_path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            base = f"{method} {parts.path or '/'}"[:80]
            names[base] += 1
            name = base if names[base] == 1 else f"{base} #{names[base]}"
            headers = {
                n: v
                for n, v in _pairs(request.get("headers"))
                if not n.startswith(":") and n.lower() not in _SKIPPED_HEADERS
            }
            body = _dict(request.get("postData")).get("text")
            self.cookies(request, where)
            step: dict[str, Any] = {"name": name, "method": method, "path": literal(target_path)}
            if headers:
                step["headers"] = {n: literal(v) for n, v in headers.items()}
            if isinstance(body, str) and body:
                step["body"] = literal(body)
            notes = self.reuse(step, target_path, headers, body, offered, steps, where, position)
            notes += self.secrets(step)
            if position + 1 < len(kept):
                gap = self.gap(entry, kept[position + 1][1], where, self.where(kept[position + 1][0]))
                if gap >= 1:
                    step["think_time"] = {"type": "constant", "duration_ms": gap}
                    notes.append(f"think time {gap} ms (the recorded gap to the next request)")
            steps.append(step)
            self.conversion.add(
                Outcome.CONVERTED,
                where,
                f"{method} {step['path'][:80]}",
                f"step '{name}'" + "".join(f"; {n}" for n in notes),
                ("scenarios", 0, "steps", len(steps) - 1),
            )
            offered.append((position, index, response))
            for cookie_name, _ in _pairs(response.get("cookies")) + [
                (value.split("=", 1)[0].strip(), "")
                for n, value in _pairs(response.get("headers"))
                if n.lower() == "set-cookie"
            ]:
                self.jar.add(cookie_name)
        return steps

    def gap(self, entry: Any, following: Any, where: str, next_where: str) -> int:
        started = _started_ms(_field(entry, where, "startedDateTime"), where)
        took = entry.get("time", 0)
        took = float(took) if isinstance(took, (int, float)) and not isinstance(took, bool) and took >= 0 else 0.0
        next_started = _started_ms(_field(following, next_where, "startedDateTime"), next_where)
        return int(min(max(0.0, next_started - (started + took)), 86_400_000))

    def cookies(self, request: Any, where: str) -> None:
        pairs = _pairs(request.get("cookies"))
        for name, value in _pairs(request.get("headers")):
            if name.lower() == "cookie":
                pairs += [
                    (p.split("=", 1)[0].strip(), p.split("=", 1)[1] if "=" in p else "")
                    for p in value.split(";")
                    if p.strip()
                ]
        for name, _ in pairs:
            if name in self.jar or name in self.outside_cookies:
                continue
            self.outside_cookies[name] = self.credentials.parameter(f"cookie_{name}")
            self.conversion.add(
                Outcome.CONVERTED, where, f"cookie {name}",
                f"set before the recording: parameter {self.outside_cookies[name]} (give it with -p), sent in the scenario's Cookie header; "
                "cookies the recorded responses set are the VU's cookie jar's",
                ("parameters",),
            )  # fmt: skip

    def cookie_header(self) -> str:
        return "; ".join(f"{name}={{{{ params.{parameter} }}}}" for name, parameter in self.outside_cookies.items())

    def secrets(self, step: dict[str, Any]) -> list[str]:
        notes: list[str] = []
        for header, value in list((step.get("headers") or {}).items()):
            template = self.credentials.header(header, value)
            if template is not None:
                step["headers"][header] = template
                notes.append(f"{header} from a parameter (the recorded value is not written)")
        if isinstance(step.get("body"), str):
            step["body"], fields = self.credentials.body(step["body"])
            notes += [f"body field {field} from a parameter" for field in fields]
        step["path"], fields = self.credentials.query(step["path"])
        notes += [f"query field {field} from a parameter" for field in fields]
        return notes

    def reuse(
        self, step: dict[str, Any], path: str, headers: dict[str, str], body: Any, offered: list[tuple[int, int, Any]],
        steps: list[dict[str, Any]], where: str, position: int,
    ) -> list[str]:  # fmt: skip
        """Values of this request an earlier response gave: extracted there, templated here."""
        wanted: list[str] = [path.split("?")[0]] + [segment for segment in path.split("?")[0].split("/") if segment]
        wanted += [value for _, value in parse_qsl(urlsplit(path).query)]
        for header, value in headers.items():
            wanted.append(value.partition(" ")[2] if header.lower() == "authorization" else value)
        if isinstance(body, str):
            try:
                wanted += [value for _, _, value in leaves(json.loads(body))]
            except (ValueError, RecursionError):
                wanted += [value for _, value in parse_qsl(body)]
        notes: list[str] = []
        done: set[str] = set()
        for value in sorted({w for w in wanted if len(w) >= MIN_REUSED_LENGTH}, key=len, reverse=True):
            found = self.find(value, offered)
            if found is None or value in done:
                continue
            step_index, extractor, source_where = found
            variable = extractor["var"]
            template = "{{ " + variable + " }}"
            changed = False
            if value in step["path"]:
                # A whole path reused (a Location): the plan's path must still start with "/".
                whole = value.startswith("/") and step["path"].startswith(value)
                step["path"] = step["path"].replace(value, "/{{ " + variable + "[1:] }}" if whole else template)
                changed = True
            for header in list(step.get("headers") or {}):
                if value in step["headers"][header]:
                    step["headers"][header] = step["headers"][header].replace(value, template)
                    changed = True
            if isinstance(step.get("body"), str) and value in step["body"]:
                step["body"] = step["body"].replace(value, template)
                changed = True
            if not changed:
                continue
            done.add(value)
            extracts = steps[step_index].setdefault("extract", [])
            if extractor not in extracts:
                extracts.append(extractor)
            notes.append(
                f"{variable} extracted from {source_where}'s response ({extractor['from']} {extractor.get('expression', '')})"
            )
        return notes

    def find(self, value: str, offered: list[tuple[int, int, Any]]) -> tuple[int, dict[str, Any], str] | None:
        for step_index, index, response in reversed(offered):
            source_where = f"log.entries[{index}]"
            for header, header_value in _pairs(response.get("headers")):
                if header.lower() in ("set-cookie", "date", "content-length", "content-type"):
                    continue
                location = header_value
                if header.lower() == "location" and header_value.startswith(("http://", "https://")):
                    parts = urlsplit(header_value)
                    location = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                if location == value and location == header_value:
                    return step_index, self.extractor(step_index, "header", header, header), source_where
            content = _dict(response.get("content"))
            text = content.get("text")
            if not isinstance(text, str) or not text:
                continue
            if content.get("encoding") == "base64":
                try:
                    text = base64.b64decode(text).decode("utf-8")
                except ValueError:
                    continue
            try:
                document = json.loads(text)
            except (ValueError, RecursionError):
                continue
            for json_path, key, leaf in leaves(document):
                if leaf == value:
                    return step_index, self.extractor(step_index, "json", json_path, key), source_where
        return None

    def extractor(self, step_index: int, source: str, expression: str, key: str) -> dict[str, Any]:
        cache = self.__dict__.setdefault("_extractors", {})
        if (step_index, source, expression) not in cache:
            variable = identifier(key, self.variables)
            cache[(step_index, source, expression)] = {"var": variable, "from": source, "expression": expression}
        extractor: dict[str, Any] = cache[(step_index, source, expression)]
        return extractor

    def common_headers(self, steps: list[dict[str, Any]]) -> dict[str, str]:
        """Headers every step sends alike, moved to the scenario (its steps' own stay)."""
        if len(steps) < 2:
            return {}
        common = dict(steps[0].get("headers") or {})
        for step in steps[1:]:
            common = {k: v for k, v in common.items() if (step.get("headers") or {}).get(k) == v}
        common = {k: v for k, v in common.items() if "{{" not in v}
        for step in steps:
            own = {k: v for k, v in (step.get("headers") or {}).items() if k not in common}
            if own:
                step["headers"] = own
            else:
                step.pop("headers", None)
        return common
