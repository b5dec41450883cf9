"""yandex-tank configs (``load.yaml``: the phantom or pandora section, autostop) and pandora's own
config, with their ammo, converted to a Horde plan.

- **The load model.** tank's ``load_type: rps`` (and every pandora pool's ``rps``) is an open
  model: arrivals at the schedule's rate, at most ``instances`` (pandora's ``startup``) busy at
  once, which becomes ``max_vus``. ``load_type: instances`` is a closed model: the schedule gives
  the VU count. pandora's ``unlimited`` is a closed model too: its instances, each as fast as it
  can.
- **The schedule.** tank's ``line(a, b, dur)``, ``const(r, dur)``, ``step(a, b, step, dur)`` are
  Horde's own profile segments (``workload.profile``, :mod:`horde.plan.profiles`), written as they
  are; pandora's list of ``{type: line|const|step, ...}`` is written the same way. pandora's
  ``once`` (a burst) becomes a one-second segment, an approximation said so.
- **The ammo** (:mod:`horde.conversion.ammo`). Up to :data:`MAX_STEPS` distinct requests become a
  weighted choice, one branch a request, its weight the times it appears (so tags keep their
  share); past that, a request feeder per method (a CSV of URIs beside the plan) with a choice
  weighted by method. phantom fires the ammo in file order; the plan draws it by share.
- **Autostop** criteria become autostop rules (:func:`autostop_rule`).

Every element met is a finding at its ``file:line``; what cannot be read is an
:class:`~horde.errors.InvalidInput` located the same way, with a hint.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from horde.conversion.ammo import AmmoRequest, guess_type, kind_of, parse_ammo
from horde.conversion.credentials import Credentials
from horde.conversion.findings import Conversion, Outcome, PlanPath
from horde.errors import InvalidInput
from horde.plan.profiles import lower_profile
from horde.plan.redaction import is_secret_parameter

#: Distinct requests written as steps; more become a request feeder.
MAX_STEPS = 40
#: phantom's default number of instances (its most requests in flight).
DEFAULT_INSTANCES = 1000
#: Headers the engine writes itself, or that the target's URL decides.
_ENGINE_HEADERS = ("host", "content-length", "connection")
#: Sections that report, show or upload results: Horde's store, report and dashboard do that.
_REPORTING = ("console", "overload", "uploader", "influx", "json_report", "offline_report", "jsonreport", "core")
#: phantom's settings of its own process (logging, caching, threads): the engine needs none.
_PHANTOM_OWN = (
    "enabled", "package", "writelog", "verbose_histogram", "phantom_path", "buffered_seconds", "cache_dir",
    "force_stepping", "file_cache", "chosen_cases", "use_caching", "connection_test", "tank_type", "enum_ammo",
    "affinity", "threads", "phout_file", "client_cpu_affinity", "additional_libs", "config", "header_http",
    "phantom_modules_path", "port", "gatling_ip", "source_log_prefix",
)  # fmt: skip
_SCHEDULE_SEGMENT = re.compile(r"\s*([a-z_]+)\s*\(([^()]*)\)\s*")
_TIME_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")
#: net codes (errno) Horde counts under their own error kind.
_ERRNO_KINDS = {"110": "timeout", "111": "refused", "104": "reset"}


def convert_tank(path: Path) -> Conversion:
    """The Horde plan of a yandex-tank ``load.yaml`` or a pandora config at ``path``."""
    document = _read_yaml(path)
    label = path.name
    conversion = Conversion(path, "tank", {"version": 1, "name": path.stem or "tank"})
    converter = _Converter(conversion, path, label)
    if "pools" in document:
        converter.pandora(document, path, label)
    else:
        enabled = [
            key
            for key in ("phantom", "pandora")
            if isinstance(document.get(key), dict) and document[key].get("enabled", key == "phantom") is not False
        ]
        if not enabled:
            raise InvalidInput(
                f"{label}: no phantom or pandora section enabled",
                hint="a tank config has phantom: {address, load_profile, ammofile} or pandora: {enabled: true, config_content}",
            )
        for key in document:
            if key == "phantom" and "phantom" in enabled:
                converter.phantom(document["phantom"], _line(document, key))
            elif key == "pandora" and "pandora" in enabled:
                converter.pandora_section(document["pandora"], _line(document, key))
            elif key == "autostop":
                converter.autostop(document[key], _line(document, key))
            else:
                converter.section(document, key)
    if not conversion.plan.get("scenarios"):
        raise InvalidInput(
            f"{label}: nothing Horde can send", hint="the config's load must be HTTP (phantom or pandora's http gun)"
        )
    if converter.credentials.parameters:
        conversion.plan["parameters"] = converter.credentials.parameters
    order = ("version", "name", "parameters", "target", "scenarios", "autostop")
    conversion.plan = {key: conversion.plan[key] for key in order if key in conversion.plan}
    return conversion


def _read_yaml(path: Path) -> CommentedMap:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInput(
            f"cannot read {path}: {error}", hint="give a yandex-tank load.yaml or a pandora config"
        ) from None
    try:
        document = YAML(typ="rt").load(text)
    except YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path.name}:{mark.line + 1}" if mark is not None else path.name
        raise InvalidInput(
            f"{where}: not YAML ({getattr(error, 'problem', None) or error})", hint="fix the YAML syntax"
        ) from None
    if not isinstance(document, CommentedMap):
        raise InvalidInput(
            f"{path.name}: not a mapping of sections", hint="a tank config maps sections: phantom:, autostop: ..."
        )
    return document


def _line(node: Any, key: str | int) -> int:
    """The 1-based line of ``key`` in a mapping (or item of a list) read by ruamel."""
    try:
        if isinstance(node, CommentedSeq):
            return int(node.lc.item(key)[0]) + 1
        if isinstance(node, CommentedMap):
            return int(node.lc.key(key)[0]) + 1
    except (KeyError, IndexError, TypeError, AttributeError):
        pass
    return int(getattr(getattr(node, "lc", None), "line", 0) or 0) + 1


def tank_seconds(text: object, *, default_unit: str = "s") -> float:
    """Seconds of a tank duration: ``30s``, ``1m30s``, ``1h``, ``2d``, a bare number in
    ``default_unit``; ValueError otherwise.

    >>> tank_seconds("1m30s"), tank_seconds("15"), tank_seconds("1s500ms", default_unit="ms")
    (90.0, 15.0, 1.5)
    """
    cleaned = str(text).strip().lower()
    parts = _TIME_PART.findall(cleaned)
    if not cleaned or "".join(number + unit for number, unit in parts) != cleaned:
        raise ValueError(f"'{text}' is not a duration")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    return sum(float(number) * scale[unit or default_unit] for number, unit in parts)


def _duration_text(seconds: float) -> str:
    """A duration as Horde's profile writes it: ``90s``, ``250ms``."""
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000, 3):g}ms"


def _number_text(value: float) -> str:
    return f"{value:g}"


def parse_schedule(text: str, where: str) -> list[tuple[str, list[float], float]]:
    """tank's schedule (``line(1, 100, 10m) const(100, 30m)``) as segments ``(function, levels,
    seconds)``; InvalidInput located at ``where`` with a hint otherwise.

    >>> parse_schedule("line(1, 100, 10m) const(100,30s)", "load.yaml:5")
    [('line', [1.0, 100.0], 600.0), ('const', [100.0], 30.0)]
    """
    arity = {"line": 3, "const": 2, "step": 4}
    hint = "tank's schedule: line(from, to, duration) const(level, duration) step(from, to, step, duration)"
    segments: list[tuple[str, list[float], float]] = []
    position = 0
    cleaned = text.strip().lower()
    if not cleaned:
        raise InvalidInput(f"{where}: the schedule is empty", hint=hint)
    while position < len(cleaned):
        match = _SCHEDULE_SEGMENT.match(cleaned, position)
        if match is None:
            raise InvalidInput(f"{where}: cannot read the schedule from '{cleaned[position:][:60]}'", hint=hint)
        position = match.end()
        name, inside = match.groups()
        if name not in arity:
            raise InvalidInput(f"{where}: '{name}' is not a schedule function", hint=hint)
        args = [part.strip() for part in inside.split(",")]
        if len(args) != arity[name]:
            raise InvalidInput(f"{where}: {match.group(0).strip()} takes {arity[name]} values", hint=hint)
        try:
            seconds = tank_seconds(args[-1])
            levels = [float(arg) for arg in args[:-1]]
        except ValueError as error:
            raise InvalidInput(f"{where}: {match.group(0).strip()}: {error}", hint=hint) from None
        if not all(0 <= level <= 10_000_000 for level in levels) or not 0 < seconds <= 30 * 86400:
            raise InvalidInput(
                f"{where}: {match.group(0).strip()} is out of range",
                hint="levels from 0 to 10,000,000, durations up to 30 days",
            )
        if name == "step" and levels[2] <= 0:
            raise InvalidInput(f"{where}: {match.group(0).strip()}: the step must be above 0", hint=hint)
        segments.append((name, levels, seconds))
    return segments


def _profile_text(segments: list[tuple[str, list[float], float]], where: str) -> str:
    text = " ".join(
        f"{name}({', '.join(map(_number_text, levels))}, {_duration_text(seconds)})"
        for name, levels, seconds in segments
    )
    try:
        lower_profile(text)  # Horde's rule for what a profile may be (a step making too many stages...)
    except ValueError as error:
        raise InvalidInput(
            f"{where}: {error}", hint="make the schedule's steps larger or its segments longer"
        ) from None
    return text


def autostop_rule(criterion: str) -> tuple[Outcome, dict[str, Any] | None, str]:
    """A tank autostop criterion as a Horde autostop rule: the outcome, the rule (None when not
    converted) and what differs. ValueError for a criterion that cannot be read.

    tank checks each second and fires when the criterion held every second of its window; Horde
    measures the figure over the whole sliding window, which is why these are approximations.

    >>> autostop_rule("quantile(95, 100ms, 10s)")[1]
    {'when': 'p95 > 100ms', 'window_s': 10}
    >>> autostop_rule("http(5xx, 10%, 5s)")[1]
    {'when': 'errors > 10%', 'window_s': 5}
    """
    match = re.fullmatch(r"\s*([a-z_]+)\s*\((.*)\)\s*", criterion.lower())
    if match is None:
        raise ValueError(f"'{criterion}' is not a criterion such as time(1s,10s)")
    name, inside = match.groups()
    args = [part.strip() for part in inside.split(",")]
    per_second = "tank fires when every second of the window crosses it; Horde measures the window as a whole"

    def window(text: str) -> int:
        seconds = tank_seconds(text)
        if not 1 <= seconds <= 30 * 86400:
            raise ValueError(f"window '{text}' must be from 1 s to 30 days")
        return max(1, round(seconds))

    if name == "time" and len(args) == 2:
        limit_ms = tank_seconds(args[0], default_unit="ms") * 1000
        return Outcome.APPROXIMATED, {"when": f"mean > {limit_ms:g}ms", "window_s": window(args[1])}, per_second
    if name == "quantile" and len(args) == 3:
        quantile = float(args[0])
        if not 0 < quantile <= 100:
            raise ValueError(f"quantile '{args[0]}' must be above 0 and at most 100")
        limit_ms = tank_seconds(args[1], default_unit="ms") * 1000
        metric = f"p{quantile:g}"
        return Outcome.APPROXIMATED, {"when": f"{metric} > {limit_ms:g}ms", "window_s": window(args[2])}, per_second
    if name in ("http", "net") and len(args) == 3:
        mask, level, span = args
        seconds = window(span)
        if not level.endswith("%"):
            float(level)  # a count: read, to refuse what is no number
            return (
                Outcome.NOT_CONVERTED,
                None,
                f"a count of {level} responses a second; Horde's autostop takes shares (errors > N%): write one for your rate",
            )
        share = float(level[:-1])
        if not 0 <= share <= 100:
            raise ValueError(f"'{level}' must be from 0% to 100%")
        if name == "http":
            if re.fullmatch(r"[0-9x]{1,3}", mask) is None:
                raise ValueError(f"'{mask}' is not an HTTP code mask such as 5xx or 404")
            if re.fullmatch(r"\d{3}", mask) and int(mask) >= 400:
                return (
                    Outcome.APPROXIMATED,
                    {"when": f"errors.status_{mask} > {share:g}%", "window_s": seconds},
                    per_second,
                )
            if mask[0] in "123":
                return (
                    Outcome.NOT_CONVERTED,
                    None,
                    f"{mask} answers are successes to Horde (below 400), never counted as errors",
                )
            return (
                Outcome.APPROXIMATED,
                {"when": f"errors > {share:g}%", "window_s": seconds},
                f"counts every error kind, not only {mask} answers; {per_second}",
            )
        if mask in _ERRNO_KINDS:
            kind = _ERRNO_KINDS[mask]
            return Outcome.APPROXIMATED, {"when": f"errors.{kind} > {share:g}%", "window_s": seconds}, per_second
        return (
            Outcome.APPROXIMATED,
            {"when": f"errors > {share:g}%", "window_s": seconds},
            f"counts HTTP errors too, not only network ones ({mask}); {per_second}",
        )
    if name in ("time", "quantile", "http", "net") and len(args) == 4:
        return (
            Outcome.NOT_CONVERTED,
            None,
            f"a criterion on tag {args[3]}: a Horde autostop rule takes step: NAME (the step of that tag) beside when",
        )
    if name == "limit":
        return Outcome.NOT_CONVERTED, None, "a limit on the test's length: the plan's stages end it (shorten them)"
    return (
        Outcome.NOT_CONVERTED,
        None,
        f"Horde's autostop has no rule like {name}(...): judge it after the run with thresholds",
    )


class _Converter:
    def __init__(self, conversion: Conversion, path: Path, label: str) -> None:
        self.conversion = conversion
        self.folder = path.parent
        self.label = label
        self.credentials = Credentials()

    def add(
        self, outcome: Outcome, line: int, element: str, note: str, plan_path: PlanPath = (), label: str | None = None
    ) -> None:
        where = label or self.label
        self.conversion.add(outcome, f"{where}:{line}" if line else where, element, note, plan_path)

    # -- sections -------------------------------------------------------------------------

    def section(self, document: CommentedMap, key: str) -> None:
        value = document[key]
        line = _line(document, key)
        if isinstance(value, dict) and value.get("enabled") is False:
            self.add(Outcome.CONVERTED, line, f"section {key}", "disabled: nothing to convert")
        elif key in _REPORTING:
            self.add(
                Outcome.CONVERTED,
                line,
                f"section {key}",
                "reporting: Horde's store, report and dashboard keep the results",
            )
        elif key in ("telegraf", "monitoring"):
            self.add(
                Outcome.NOT_CONVERTED, line, f"section {key}",
                "the target hosts' monitoring: add Horde monitors (node_exporter) to the plan; see docs/plans.md",
            )  # fmt: skip
        else:
            self.add(Outcome.NOT_CONVERTED, line, f"section {key}", "Horde has nothing like it; the plan leaves it out")

    def phantom(self, section: CommentedMap, line: int) -> None:
        address = section.get("address")
        if not isinstance(address, str) or not address.strip():
            raise InvalidInput(
                f"{self.label}:{line}: phantom has no address", hint="address: host:port, e.g. 127.0.0.1:8080"
            )
        base_url = self.base_url(address, bool(section.get("ssl")), _line(section, "address"))
        self.add(
            Outcome.CONVERTED, _line(section, "address"), "phantom.address", f"target.base_url {base_url}", ("target",)
        )
        target: dict[str, Any] = {"base_url": base_url}
        if "timeout" in section:
            try:
                target["request_timeout_ms"] = max(1, round(tank_seconds(section["timeout"]) * 1000))
            except ValueError as error:
                raise InvalidInput(
                    f"{self.label}:{_line(section, 'timeout')}: phantom.timeout: {error}", hint="e.g. 11s"
                ) from None
            self.add(
                Outcome.CONVERTED,
                _line(section, "timeout"),
                "phantom.timeout",
                "target.request_timeout_ms",
                ("target",),
            )
        self.conversion.plan["target"] = target
        profile = section.get("load_profile")
        if not isinstance(profile, dict) or not isinstance(profile.get("schedule"), str):
            raise InvalidInput(
                f"{self.label}:{line}: phantom has no load_profile.schedule",
                hint="load_profile: {load_type: rps, schedule: 'line(1, 100, 10m)'}",
            )
        load_type = profile.get("load_type", "rps")
        where = f"{self.label}:{_line(profile, 'schedule')}"
        segments = parse_schedule(profile["schedule"], where)
        instances = section.get("instances", DEFAULT_INSTANCES)
        if not isinstance(instances, int) or isinstance(instances, bool) or not 1 <= instances <= 10_000_000:
            raise InvalidInput(
                f"{self.label}:{_line(section, 'instances')}: phantom.instances must be a whole number from 1",
                hint="e.g. instances: 1000",
            )
        workload_path: PlanPath = ("scenarios", 0, "workload")
        if load_type == "rps":
            workload = {"type": "open", "profile": _profile_text(segments, where), "max_vus": instances}
            note = "an open workload: arrivals at the schedule's rate, at most phantom.instances busy (max_vus)"
        elif load_type == "instances":
            for name, levels, _ in segments:
                if any(level != int(level) for level in levels):
                    raise InvalidInput(
                        f"{where}: {name}(...) gives a fraction of an instance",
                        hint="instance counts are whole numbers",
                    )
            workload = {"type": "closed", "profile": _profile_text(segments, where)}
            note = "a closed workload: the schedule gives the VU count, each VU looping the requests"
        else:
            raise InvalidInput(
                f"{where}: load_type '{load_type}' is not one Horde converts",
                hint="load_type: rps (arrivals a second) or instances (concurrent users); a stpd_file has no schedule to read",
            )
        for name, levels, seconds in segments:
            self.add(
                Outcome.CONVERTED, _line(profile, "schedule"), f"schedule {name}({', '.join(map(_number_text, levels))}, {_duration_text(seconds)})",
                "a segment of workload.profile", (*workload_path, "profile"),
            )  # fmt: skip
        self.add(
            Outcome.CONVERTED,
            _line(profile, "load_type") if "load_type" in profile else line,
            f"load_type {load_type}",
            note,
            workload_path,
        )
        requests, source = self.phantom_ammo(section, line)
        steps_path: PlanPath = ("scenarios", 0)
        scenario = self.scenario("phantom", requests, source, workload, steps_path)
        self.conversion.plan["scenarios"] = [scenario]
        for key in section:
            if key in (
                "address",
                "ssl",
                "timeout",
                "load_profile",
                "instances",
                "ammofile",
                "ammo_type",
                "uris",
                "headers",
            ):
                continue
            key_line = _line(section, key)
            if key in _PHANTOM_OWN:
                self.add(
                    Outcome.CONVERTED, key_line, f"phantom.{key}", "phantom's own setting: Horde's engine needs none"
                )
            elif key in ("loop", "ammo_limit"):
                self.add(
                    Outcome.APPROXIMATED, key_line, f"phantom.{key} {section[key]}",
                    "phantom stops after so many requests or passes; the plan runs for its schedule's length", workload_path,
                )  # fmt: skip
            elif key == "autocases":
                self.add(Outcome.CONVERTED, key_line, "phantom.autocases", "steps are named by tag or by request")
            else:
                self.add(
                    Outcome.NOT_CONVERTED,
                    key_line,
                    f"phantom.{key}",
                    "Horde has nothing like it; the plan leaves it out",
                    ("scenarios", 0),
                )

    def phantom_ammo(self, section: CommentedMap, line: int) -> tuple[list[AmmoRequest], str]:
        headers_lines = section.get("headers") or []
        if not isinstance(headers_lines, list) or not all(isinstance(h, str) for h in headers_lines):
            raise InvalidInput(
                f"{self.label}:{_line(section, 'headers')}: phantom.headers must be a list of '[Name: value]'",
                hint="headers: ['[Host: example.org]']",
            )
        if "uris" in section:
            uris = section["uris"]
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise InvalidInput(
                    f"{self.label}:{_line(section, 'uris')}: phantom.uris must be a list of paths",
                    hint="uris: ['/', '/buy tag']",
                )
            requests: list[AmmoRequest] = []
            for index, uri in enumerate(uris):
                text = "\n".join([*headers_lines, uri]).encode()
                parsed = parse_ammo(text, "uri", f"{self.label}:{_line(uris, index)}")
                requests += [
                    AmmoRequest(r.method, r.uri, r.headers, r.body, r.tag, f"{self.label}:{_line(uris, index)}")
                    for r in parsed
                ]
            if not requests:
                raise InvalidInput(
                    f"{self.label}:{_line(section, 'uris')}: phantom.uris lists no request",
                    hint="uris: ['/', '/buy tag']",
                )
            return requests, f"{self.label}:{_line(section, 'uris')} (phantom.uris)"
        ammofile = section.get("ammofile")
        if not isinstance(ammofile, str) or not ammofile:
            raise InvalidInput(
                f"{self.label}:{line}: phantom has neither ammofile nor uris", hint="ammofile: ammo.txt, or uris: ['/']"
            )
        ammo_type = section.get("ammo_type")
        if ammo_type == "access":
            raise InvalidInput(
                f"{self.label}:{_line(section, 'ammo_type')}: ammo_type access is an access log",
                hint=f"horde profile {ammofile} --plan plan.yaml writes a plan from a log",
            )
        return self.ammo_file(ammofile, ammo_type, _line(section, "ammofile"), headers_lines)

    def ammo_file(
        self, name: str, ammo_type: Any, line: int, headers_lines: list[str]
    ) -> tuple[list[AmmoRequest], str]:
        file = (self.folder / name) if not Path(name).is_absolute() else Path(name)
        if name.startswith(("http://", "https://")):
            raise InvalidInput(
                f"{self.label}:{line}: ammo at a URL ({name})", hint="download the ammo and give its path"
            )
        try:
            data = file.read_bytes()
        except OSError as error:
            raise InvalidInput(
                f"{self.label}:{line}: cannot read the ammo {file}: {error.strerror or error}",
                hint="give the ammo file's path, relative to the config",
            ) from None
        if ammo_type is not None and not isinstance(ammo_type, str):
            raise InvalidInput(
                f"{self.label}:{line}: the ammo type must be text", hint="uri, uripost, phantom, jsonline"
            )
        chosen = ammo_type or guess_type(data)
        if headers_lines and kind_of(chosen) in ("uri", "uripost"):
            data = ("\n".join(headers_lines) + "\n").encode() + data
            offset = len(headers_lines)
        else:
            offset = 0
        requests = parse_ammo(data, chosen, file.name)
        if offset:
            requests = [_shifted(request, offset) for request in requests]
        self.add(
            Outcome.CONVERTED, line, f"ammo {file.name} ({kind_of(chosen)}{'' if ammo_type else ', told by its content'})",
            f"{len(requests)} requests read", ("scenarios", 0, "steps"),
        )  # fmt: skip
        return requests, f"{file.name}"

    # -- pandora --------------------------------------------------------------------------

    def pandora_section(self, section: CommentedMap, line: int) -> None:
        if isinstance(section.get("config_content"), dict):
            self.pandora(section["config_content"], None, self.label)
        elif isinstance(section.get("config_file"), str):
            file = self.folder / section["config_file"]
            inner = _read_yaml(file)
            saved = (self.label, self.folder)
            self.label, self.folder = file.name, file.parent
            try:
                self.pandora(inner, file, file.name)
            finally:
                self.label, self.folder = saved
        else:
            raise InvalidInput(
                f"{self.label}:{line}: pandora has no config_content or config_file",
                hint="pandora: {enabled: true, config_content: {pools: [...]}}",
            )
        for key in section:
            if key not in ("config_content", "config_file", "enabled", "package", "pandora_cmd", "expvar", "resources"):
                self.add(
                    Outcome.NOT_CONVERTED,
                    _line(section, key),
                    f"pandora.{key}",
                    "Horde has nothing like it; the plan leaves it out",
                )

    def pandora(self, config: CommentedMap, path: Path | None, label: str) -> None:
        pools = config.get("pools")
        if not isinstance(pools, list) or not pools:
            raise InvalidInput(
                f"{label}:{_line(config, 'pools')}: pandora's pools must be a list of pools",
                hint="pools: [{id, gun, ammo, rps, startup}]",
            )
        scenarios = self.conversion.plan.setdefault("scenarios", [])
        for index, pool in enumerate(pools):
            line = _line(pools, index)
            if not isinstance(pool, dict):
                raise InvalidInput(f"{label}:{line}: a pool must be a mapping", hint="{id, gun, ammo, rps, startup}")
            gun = pool.get("gun") or {}
            gun_type = gun.get("type") if isinstance(gun, dict) else None
            name = str(pool.get("id") or f"pool-{index + 1}")
            if gun_type not in ("http", "http2", "connect"):
                self.add(
                    Outcome.NOT_CONVERTED, line, f"pool '{name}' (gun {gun_type})",
                    "only pandora's HTTP guns convert: a gRPC or custom gun's code has no Horde plan", ("scenarios",),
                )  # fmt: skip
                continue
            target = gun.get("target")
            if not isinstance(target, str) or not target:
                raise InvalidInput(
                    f"{label}:{_line(gun, 'type')}: the gun has no target", hint="gun: {type: http, target: host:port}"
                )
            base_url = self.base_url(target, bool(gun.get("ssl")), _line(gun, "target"))
            if "target" in self.conversion.plan and self.conversion.plan["target"]["base_url"] != base_url:
                self.add(
                    Outcome.APPROXIMATED, _line(gun, "target"), f"pool '{name}' target {target}",
                    f"a plan has one target: every pool is sent to {self.conversion.plan['target']['base_url']}", ("target",),
                )  # fmt: skip
            else:
                self.conversion.plan["target"] = {"base_url": base_url}
                if gun_type == "http2":
                    self.conversion.plan["target"]["http_version"] = "2"
                self.add(
                    Outcome.CONVERTED,
                    _line(gun, "target"),
                    f"gun {gun_type} {target}",
                    f"target.base_url {base_url}",
                    ("target",),
                )
            scenario_path: PlanPath = ("scenarios", len(scenarios))
            workload = self.pandora_workload(pool, line, label, (*scenario_path, "workload"))
            ammo = pool.get("ammo")
            if not isinstance(ammo, dict) or not isinstance(ammo.get("file"), str):
                raise InvalidInput(
                    f"{label}:{line}: pool '{name}' has no ammo file", hint="ammo: {type: uri, file: ./ammo.uri}"
                )
            requests, source = self.ammo_file(ammo["file"], ammo.get("type"), _line(ammo, "file"), [])
            scenarios.append(self.scenario(name, requests, source, workload, scenario_path))
            for key in pool:
                if key not in ("id", "gun", "ammo", "rps", "startup", "result", "discard_overflow", "rps-per-instance"):
                    self.add(
                        Outcome.NOT_CONVERTED,
                        _line(pool, key),
                        f"pool '{name}'.{key}",
                        "Horde has nothing like it",
                        scenario_path,
                    )
        for key in config:
            if key != "pools":
                self.add(
                    Outcome.CONVERTED,
                    _line(config, key),
                    f"pandora {key}",
                    "pandora's own setting (logging, monitoring): Horde needs none",
                    (),
                    label,
                )

    def pandora_workload(self, pool: Any, line: int, label: str, workload_path: PlanPath) -> dict[str, Any]:
        startup = pool.get("startup")
        startups = startup if isinstance(startup, list) else [startup] if startup is not None else []
        instances = 0
        for item in startups:
            if not isinstance(item, dict) or item.get("type") not in ("once", "const", "instance_step"):
                raise InvalidInput(
                    f"{label}:{_line(pool, 'startup')}: startup must be {{type: once, times: N}}",
                    hint="startup: {type: once, times: 100}",
                )
            count = item.get("times", item.get("to", 0))
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise InvalidInput(
                    f"{label}:{_line(pool, 'startup')}: startup's count must be a whole number", hint="times: 100"
                )
            instances += count
            outcome = Outcome.CONVERTED if item["type"] == "once" else Outcome.APPROXIMATED
            self.add(
                outcome, _line(pool, "startup"), f"startup {item['type']}",
                "instances: the most VUs (max_vus)" + ("" if outcome is Outcome.CONVERTED else "; Horde starts them as arrivals need them, not on pandora's schedule"),
                workload_path,
            )  # fmt: skip
        instances = max(1, min(instances or DEFAULT_INSTANCES, 10_000_000))
        rps = pool.get("rps")
        items = rps if isinstance(rps, list) else [rps] if isinstance(rps, dict) else None
        if not items:
            raise InvalidInput(
                f"{label}:{line}: the pool has no rps schedule",
                hint="rps: [{type: line, from: 1, to: 100, duration: 1m}]",
            )
        segments: list[tuple[str, list[float], float]] = []
        unlimited: float | None = None
        node = rps if isinstance(rps, list) else pool
        for index, item in enumerate(items):
            where_line = _line(node, index if isinstance(rps, list) else "rps")
            where = f"{label}:{where_line}"
            if not isinstance(item, dict):
                raise InvalidInput(
                    f"{where}: a schedule item must be a mapping", hint="{type: const, ops: 100, duration: 1m}"
                )
            kind = item.get("type")
            try:
                if kind == "line":
                    segment = ("line", [float(item["from"]), float(item["to"])], tank_seconds(item["duration"]))
                elif kind == "const":
                    segment = ("const", [float(item["ops"])], tank_seconds(item["duration"]))
                elif kind == "step":
                    segment = (
                        "step",
                        [float(item["from"]), float(item["to"]), float(item["step"])],
                        tank_seconds(item["duration"]),
                    )
                elif kind == "once":
                    segment = ("const", [float(item["times"])], 1.0)
                    self.add(
                        Outcome.APPROXIMATED, where_line, f"rps once({item['times']})",
                        "a burst at once; the plan sends it over one second", (*workload_path, "profile"),
                    )  # fmt: skip
                elif kind == "unlimited":
                    unlimited = (unlimited or 0) + tank_seconds(item["duration"])
                    self.add(
                        Outcome.CONVERTED,
                        where_line,
                        "rps unlimited",
                        "a closed workload: the instances as VUs, each as fast as it can",
                        workload_path,
                    )
                    continue
                else:
                    raise InvalidInput(
                        f"{where}: schedule type '{kind}' is not one Horde converts",
                        hint="line, const, step, once, unlimited",
                    )
            except KeyError as missing:
                raise InvalidInput(
                    f"{where}: {kind} needs {missing}",
                    hint="line: from, to, duration; const: ops, duration; step: from, to, step, duration",
                ) from None
            except (TypeError, ValueError) as error:
                raise InvalidInput(
                    f"{where}: {kind}: {error}", hint="levels are numbers, durations such as 30s or 1m"
                ) from None
            segments += parse_schedule(
                f"{segment[0]}({', '.join(map(_number_text, segment[1]))}, {_duration_text(segment[2])})", where
            )
            if kind != "once":
                self.add(
                    Outcome.CONVERTED,
                    where_line,
                    f"rps {kind}",
                    "a segment of workload.profile",
                    (*workload_path, "profile"),
                )
        if unlimited is not None:
            if segments:
                self.add(
                    Outcome.APPROXIMATED,
                    line,
                    "rps unlimited with rate segments",
                    "the rate segments are kept; unlimited's time is left out",
                    workload_path,
                )
            else:
                return {
                    "type": "closed",
                    "start_vus": instances,
                    "stages": [{"duration_s": unlimited, "vus": instances}],
                }
        return {"type": "open", "profile": _profile_text(segments, f"{label}:{line}"), "max_vus": instances}

    # -- shared ---------------------------------------------------------------------------

    def base_url(self, address: str, ssl: bool, line: int) -> str:
        text = address.strip()
        if text.startswith(("http://", "https://")):
            return text.rstrip("/")
        host, _, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
        if not host:
            host, port = text, ""
        if port and not port.isdigit():
            raise InvalidInput(f"{self.label}:{line}: '{address}' is not host:port", hint="e.g. 127.0.0.1:8080")
        scheme = "https" if ssl or port == "443" else "http"
        default = "443" if scheme == "https" else "80"
        return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")

    def scenario(
        self, name: str, requests: list[AmmoRequest], source: str, workload: dict[str, Any], path: PlanPath
    ) -> dict[str, Any]:
        host = self.conversion.plan["target"]["base_url"].split("://", 1)[1].split(":")[0]
        dropped: Counter[str] = Counter()
        hidden: set[str] = set()
        cleaned: list[AmmoRequest] = []
        for request in requests:
            headers = {}
            for header, value in request.headers.items():
                lowered = header.lower()
                if lowered in _ENGINE_HEADERS:
                    differs = lowered == "host" and value.split(":")[0] != host
                    differs = differs or (lowered == "connection" and value.strip().lower() == "close")
                    if differs:
                        dropped[f"{header}: {value}"] += 1
                    continue
                template = self.credentials.header(header, value)
                headers[header] = literal(value) if template is None else template
                if template is not None:
                    hidden.add(f"header {header}")
            # The ammo's text is sent as it is (a "{{" in it is no template); its credentials are
            # the plan's parameters, never written.
            uri, fields = self.credentials.query(literal(request.uri))
            hidden.update(f"query field {field}" for field in fields)
            body = request.body
            if body is not None:
                body, fields = self.credentials.body(literal(body))
                hidden.update(f"body field {field}" for field in fields)
            cleaned.append(AmmoRequest(request.method, uri, headers, body, request.tag, request.location))
        for what in sorted(hidden):
            self.add(
                Outcome.CONVERTED, 0, f"credential ({what})",
                "a plan parameter you give (-p or HORDE_PARAM_...): the ammo's value is not written", ("parameters",),
                label=source,
            )  # fmt: skip
        for text, count in dropped.items():
            if text.lower().startswith("host"):
                note = "the plan sends the target's host; put Host in target.headers if the virtual host matters"
            else:
                note = "Horde keeps each VU's connection alive instead of a new connection per request"
            self.add(Outcome.APPROXIMATED, 0, f"header {text} ({count} requests)", note, (*path, "steps"), label=source)
        common = dict(cleaned[0].headers)
        for request in cleaned[1:]:
            common = {key: value for key, value in common.items() if request.headers.get(key) == value}
        counts: Counter[tuple[str, str, tuple[tuple[str, str], ...], str | None, str | None]] = Counter()
        first: dict[tuple[str, str, tuple[tuple[str, str], ...], str | None, str | None], AmmoRequest] = {}
        for request in cleaned:
            own = tuple(sorted((k, v) for k, v in request.headers.items() if k not in common))
            key = (request.method, request.uri, own, request.body, request.tag)
            counts[key] += 1
            first.setdefault(key, request)
        scenario: dict[str, Any] = {"name": name}
        if common:
            scenario["headers"] = common
        if len(counts) <= MAX_STEPS:
            steps = self.request_steps(counts, first, path)
        else:
            steps = self.feeder_steps(name, list(zip(cleaned, requests)), common, scenario, path)
        scenario["steps"] = steps
        scenario["workload"] = workload
        tags = Counter(request.tag for request in cleaned if request.tag)
        # A choice draws the requests (the mix kept, not the order); one feeder keeps the order.
        drawn = steps[0].get("type") == "choice"
        if drawn:
            self.add(
                Outcome.APPROXIMATED, 0, f"ammo order ({len(cleaned)} requests)",
                "phantom fires the ammo in file order, round and round; the plan draws each request by its share: the same mix"
                + (f" ({', '.join(f'{tag} {count}' for tag, count in tags.most_common(5))})" if tags else ""),
                (*path, "steps"), label=source,
            )  # fmt: skip
        return scenario

    def request_steps(
        self, counts: Counter[Any], first: dict[Any, AmmoRequest], path: PlanPath
    ) -> list[dict[str, Any]]:
        names: set[str] = set()
        tag_counts = Counter(key[4] for key in counts)
        steps: list[dict[str, Any]] = []
        for key, count in counts.items():
            request = first[key]
            base = (
                request.tag
                if request.tag and tag_counts[request.tag] == 1
                else (
                    f"{request.tag} {request.method} {request.uri}"
                    if request.tag
                    else f"{request.method} {request.uri}"
                )[:80]
            )
            name, n = base, 2
            while name in names:
                name, n = f"{base} #{n}", n + 1
            names.add(name)
            step: dict[str, Any] = {"name": name, "method": request.method, "path": request.uri}
            own = dict(key[2])
            if own:
                step["headers"] = own
            if request.body is not None:
                step["body"] = request.body
            steps.append(step)
            self.conversion.add(
                Outcome.CONVERTED, request.location, f"request {request.method} {request.uri[:60]}" + (f" [{request.tag}]" if request.tag else ""),
                f"step '{name}'" + (f", weight {count} (its count in the ammo)" if len(counts) > 1 else ""),
                (*path, "steps", 0, "branches", len(steps) - 1) if len(counts) > 1 else (*path, "steps", 0),
            )  # fmt: skip
        if len(steps) == 1:
            return steps
        return [
            {
                "type": "choice",
                "branches": [{"weight": count, "steps": [step]} for step, count in zip(steps, counts.values())],
            }
        ]

    def feeder_steps(
        self,
        name: str,
        requests: list[tuple[AmmoRequest, AmmoRequest]],
        common: dict[str, str],
        scenario: dict[str, Any],
        path: PlanPath,
    ) -> list[dict[str, Any]]:
        """Requests as feeder rows: each pair is the request as the plan sends it (its headers)
        and as the ammo wrote it (its URI and body are data in a row, no template)."""
        by_method: dict[str, list[tuple[AmmoRequest, AmmoRequest]]] = {}
        for pair in requests:
            by_method.setdefault(pair[0].method, []).append(pair)
        folder = f"{self.conversion.source.stem}-ammo"
        feeders: list[dict[str, Any]] = []
        branches: list[dict[str, Any]] = []
        for method, group in by_method.items():
            feeder = f"ammo_{re.sub(r'[^a-z0-9]', '_', name.lower())}_{method.lower()}"
            with_body = any(original.body is not None for _, original in group)
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["uri", "body"] if with_body else ["uri"])
            query_sets: Counter[tuple[str, ...]] = Counter()
            emptied: Counter[str] = Counter()
            for _, original in group:
                # A row holds no credential: a query field's is the step's parameter, a body field's
                # is left empty (a row is data, no template can stand in it).
                uri, fields = _without_credentials(original.uri)
                query_sets[fields] += 1
                body = original.body or ""
                if body:
                    templated, named = self.credentials.body(body)
                    body = re.sub(r"\{\{ params\.\w+ \}\}", "", templated)
                    emptied.update(named)
                # Without its leading "/", which the step's path holds (a path starts with "/").
                writer.writerow([uri[1:], body] if with_body else [uri[1:]])
            file = f"{folder}/{feeder}.csv"
            self.conversion.files[file] = out.getvalue()
            feeders.append({"name": feeder, "path": file, "format": "csv", "mode": "circular"})
            step_path = "/{{ " + feeder + ".uri }}"
            fields, seen = query_sets.most_common(1)[0]
            if fields:
                joined = "&".join(f"{field}={{{{ params.{self.credentials.parameter(field)} }}}}" for field in fields)
                step_path += "{{ '&' if '?' in " + feeder + ".uri else '?' }}" + joined
            if seen < len(group):
                self.add(
                    Outcome.APPROXIMATED, 0, f"credential query fields of {len(group) - seen} {method} requests",
                    f"a feeder's step sends one set of them: {', '.join(fields) or 'none'}", (*path, "steps"),
                    label=group[0][1].location.rsplit(":", 1)[0],
                )  # fmt: skip
            for field, count in emptied.items():
                self.add(
                    Outcome.NOT_CONVERTED, 0, f"body field {field} of {count} {method} requests",
                    "a credential: the feeder's rows leave it empty; give the accounts in a feeder of your own "
                    "and put its column in the step's body", (*path, "steps"),
                    label=group[0][1].location.rsplit(":", 1)[0],
                )  # fmt: skip
            step: dict[str, Any] = {"name": f"{method} ammo", "method": method, "path": step_path}
            if with_body:
                step["body"] = "{{ " + feeder + ".body }}"
            headers = Counter(tuple(sorted((k, v) for k, v in r.headers.items() if k not in common)) for r, _ in group)
            usual, seen = headers.most_common(1)[0]
            if usual:
                step["headers"] = dict(usual)
            if seen < len(group):
                self.add(
                    Outcome.APPROXIMATED, 0, f"headers of {len(group) - seen} {method} requests",
                    "a feeder's step sends one set of headers: the most common one", (*path, "steps"),
                    label=group[0][1].location.rsplit(":", 1)[0],
                )  # fmt: skip
            branches.append({"weight": len(group), "steps": [step]})
            self.conversion.add(
                Outcome.CONVERTED, group[0][1].location, f"{len(group)} {method} requests",
                f"feeder {feeder} ({file}, in file order), step '{step['name']}'", (*path, "feeders"),
            )  # fmt: skip
        scenario["feeders"] = feeders
        return branches[0]["steps"] if len(branches) == 1 else [{"type": "choice", "branches": branches}]

    def autostop(self, section: Any, line: int) -> None:
        if not isinstance(section, dict):
            raise InvalidInput(
                f"{self.label}:{line}: autostop must be a mapping", hint="autostop: {autostop: ['time(1s,10s)']}"
            )
        if section.get("enabled") is False:
            self.add(Outcome.CONVERTED, line, "section autostop", "disabled: nothing to convert")
            return
        criteria = section.get("autostop") or []
        if not isinstance(criteria, list):
            raise InvalidInput(
                f"{self.label}:{_line(section, 'autostop')}: autostop.autostop must be a list",
                hint="autostop: ['quantile(95,100ms,10s)']",
            )
        rules = self.conversion.plan.setdefault("autostop", [])
        for index, criterion in enumerate(criteria):
            where = _line(criteria, index)
            try:
                outcome, rule, note = autostop_rule(str(criterion))
            except ValueError as error:
                raise InvalidInput(
                    f"{self.label}:{where}: autostop {criterion}: {error}",
                    hint="criteria such as time(1s,10s), http(5xx,10%,5s), net(xx,1%,10s), quantile(95,100ms,10s)",
                ) from None
            if rule is not None:
                rules.append(rule)
                self.add(
                    outcome,
                    where,
                    f"autostop {criterion}",
                    f"rule '{rule['when']}' over {rule['window_s']} s; {note}",
                    ("autostop", len(rules) - 1),
                )
            else:
                self.add(outcome, where, f"autostop {criterion}", note, ("autostop", len(rules)))
        if not rules:
            del self.conversion.plan["autostop"]


def _shifted(request: AmmoRequest, lines: int) -> AmmoRequest:
    """A request read with the config's header lines put before its file: its own line back."""
    file, _, number = request.location.rpartition(":")
    return AmmoRequest(
        request.method, request.uri, request.headers, request.body, request.tag, f"{file}:{int(number) - lines}"
    )


def literal(text: str) -> str:
    """Text sent as it is: a path or body is a template to Horde, so ``{{``, ``{%`` and ``{#``
    from the ammo are written as literal text."""
    if not any(mark in text for mark in ("{{", "{%", "{#")):
        return text
    # A path's leading "/" stays outside: Horde reads a path's first character before its template.
    lead = "/" if text.startswith("/") else ""
    inside = text[len(lead) :].replace("{% endraw %}", "{% endraw %}{{ '{% endraw %}' }}{% raw %}")
    return lead + "{% raw %}" + inside + "{% endraw %}"


def _without_credentials(uri: str) -> tuple[str, tuple[str, ...]]:
    """The URI without its query fields that hold a credential, and those fields' names (the rest
    of the query kept as written).

    >>> _without_credentials("/a?page=2&token=s3cr3t&q=x")
    ('/a?page=2&q=x', ('token',))
    """
    base, mark, query = uri.partition("?")
    if not mark:
        return uri, ()
    kept, fields = [], []
    for part in query.split("&"):
        field, _, value = part.partition("=")
        if value and is_secret_parameter(unquote(field)):
            fields.append(unquote(field))
        else:
            kept.append(part)
    return base + ("?" + "&".join(kept) if kept else ""), tuple(fields)
