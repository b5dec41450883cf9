"""What JMeter's timers, extractors and assertions become in a Horde plan, and the pacing or
rate its throughput timers give a scenario.

Each rule asks the plan layer (and through it the engine) whether what it wrote is accepted
before it keeps it: a JMeter regex with a look-ahead, a Jayway JSONPath function or a condition
the engine cannot read is reported as not converted, quoted, rather than breaking the plan.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from horde.conversion.findings import Outcome
from horde.conversion.jmeter_text import Names, identifier, is_number
from horde.conversion.jmeter_xml import Node
from horde.errors import PlanInvalid
from horde.plan.parameters import apply_parameters
from horde.plan.problems import plan_from_dict

#: The pause the plan's steering divides (``by: pace``) where the game team's JSR223 timer stood:
#: paces from 0.005 to 10 give 20 s to 10 ms, the bounds the timer kept its sleep in.
STEERED_PAUSE_MS = 100
#: The target when the plan gives none: the game team's (their field report agreed on 50 ms).
DEFAULT_TARGET_MS = 50

Steps = list[dict[str, Any]]


def engine_refuses(
    *,
    extract: list[dict[str, Any]] | None = None,
    checks: list[dict[str, Any]] | None = None,
    control: dict[str, Any] | None = None,
    variables: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    base_url: str = "http://127.0.0.1:1",
    parameters: dict[str, Any] | None = None,
    workload: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
    think_time: dict[str, Any] | None = None,
) -> str | None:
    """Why the plan layer refuses a request with these extractions, checks and headers (or a
    ``control`` step, an ``if`` or ``loop``, around it; or this target), or None when it accepts
    them. The ``variables`` the expression reads are set by a step before it; the ``parameters``
    are substituted first, as the loader does."""
    request: dict[str, Any] = {"name": "probe", "method": "GET", "path": "/"}
    given = {"extract": extract, "checks": checks, "headers": headers, "think_time": think_time}
    request.update({key: value for key, value in given.items() if value})
    steps: list[dict[str, Any]] = [request]
    if control is not None:
        steps = [{**control, **({"then": steps} if control.get("type") == "if" else {"steps": steps})}]
    setup = [
        {"name": f"set {name}", "method": "GET", "path": "/", "extract": [{"var": name, "from": "status"}]}
        for name in variables
    ]
    document = {
        "version": 1,
        "parameters": parameters or {},
        "target": {"base_url": base_url, **(target or {})},
        "scenarios": [
            {
                "name": "s",
                "setup": setup,
                "steps": steps,
                "workload": workload or {"type": "closed", "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }
    try:
        plan_from_dict(apply_parameters(document).data)
    except PlanInvalid as error:
        return "; ".join(problem.message for problem in error.problems[:2])
    return None


@dataclass
class Scope:
    """What a controller's configuration gives to every request in its scope."""

    headers: dict[str, str] = field(default_factory=dict)
    #: Pauses before each request: think-time documents.
    pauses: list[dict[str, Any]] = field(default_factory=list)
    extract: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: Duration assertions: the latency limit each request in scope is judged by (ms).
    max_ms: list[float] = field(default_factory=list)

    def inner(self) -> Scope:
        return Scope(dict(self.headers), list(self.pauses), list(self.extract), list(self.checks), list(self.max_ms))


class Walk(Protocol):
    """The converter's walk, as the rules and controllers use it (horde.conversion.jmeter)."""

    names: Names
    plan: dict[str, Any]
    steer: dict[str, Any] | None

    @property
    def scenario_name(self) -> str | None: ...

    def found(self, outcome: Outcome, label: str, node: Node, note: str, anchor: object = None) -> None: ...

    def report(self, label: str, node: Node, note: str, differences: list[str], anchor: object) -> None: ...

    def skipped(self, label: str, tree: Node | None, why: str, anchor: object) -> None: ...

    def left_out(self, label: str, element: Node, tree: Node | None, note: str, anchor: object) -> Steps: ...

    def disabled(self, element: Node, subtree: Node | None, label: str, anchor: object) -> None: ...

    def configure(self, element: Node, subtree: Node | None, scope: Scope, label: str, *, plan_level: bool) -> bool: ...

    def children(self, tree: Node | None, scope: Scope, label: str) -> Steps: ...

    def element(self, element: Node, subtree: Node | None, scope: Scope, label: str, siblings: Steps) -> Steps: ...

    def inner_steps(self, element: Node, tree: Node | None, scope: Scope, label: str, siblings: Steps) -> Steps: ...


_REFUSED = "the plan refuses it as written ({}); nothing is {}"


class Met(NamedTuple):
    """An element met in the walk, and where: the converter, the element, the scope it applies
    to, its file's label and the plan's part its finding is about."""

    conv: Walk
    element: Node
    scope: Scope
    label: str
    anchor: object


@dataclass
class JmeterRules:
    #: Throughput timers met in the scenario being converted: (element, label).
    throughput: list[tuple[Node, str]] = field(default_factory=list)

    # --- timers, extractors, assertions ---------------------------------------------------------

    def apply(self, conv: Walk, element: Node, scope: Scope, label: str, anchor: object) -> None:
        kind = element.kind
        if kind in ("ConstantThroughputTimer", "PreciseThroughputTimer"):
            self.throughput.append((element, label))
            return
        handler = getattr(self, f"_{kind}")
        handler(Met(conv, element, scope, label, anchor))

    def _pause(
        self,
        at: Met,
        pause: dict[str, Any],
        note: str,
        outcome: Outcome = Outcome.CONVERTED,
    ) -> None:
        conv, element, scope, label, anchor = at.conv, at.element, at.scope, at.label, at.anchor
        refused = engine_refuses(think_time=pause, parameters=conv.names.typed_parameters())
        if refused is not None:
            conv.found(Outcome.NOT_CONVERTED, label, element, _REFUSED.format(refused, "paused"), anchor)
            return
        scope.pauses.append(pause)
        conv.found(outcome, label, element, f"a pause before each request in its scope: {note}", anchor)

    def _offset_and_range(self, at: Met) -> tuple[float, float] | None:
        """A random timer's constant offset and its range (or deviation, or lambda), in ms;
        None, reported, when either is not a number."""
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        unresolved: list[str] = []
        offset, spread = (
            self._millis(conv, element, n, unresolved) for n in ("ConstantTimer.delay", "RandomTimer.range")
        )
        if offset is None or spread is None:
            conv.found(Outcome.NOT_CONVERTED, label, element, f"{', '.join(unresolved)} is not a number", anchor)
            return None
        return offset, spread

    def _millis(self, conv: Walk, element: Node, name: str, unresolved: list[str]) -> float | None:
        value = conv.names.number(element.prop(name) or "0", unresolved)
        return None if value is None else conv.names.resolved_number(value)

    def _ConstantTimer(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        unresolved: list[str] = []
        delay = conv.names.number(element.prop("ConstantTimer.delay") or "0", unresolved)
        if delay is None:
            conv.found(Outcome.NOT_CONVERTED, label, element, f"its delay {unresolved[0]} is not a number", anchor)
            return
        self._pause(at, {"type": "constant", "duration_ms": delay}, f"{delay} ms")

    def _UniformRandomTimer(self, at: Met) -> None:
        read = self._offset_and_range(at)
        if read is None:
            return
        offset, spread = read
        pause = {"type": "uniform", "min_ms": offset, "max_ms": offset + spread}
        self._pause(at, pause, f"uniform from {offset:g} to {offset + spread:g} ms")

    def _GaussianRandomTimer(self, at: Met) -> None:
        read = self._offset_and_range(at)
        if read is None:
            return
        offset, deviation = read
        pause = {"type": "normal", "mean_ms": offset, "stddev_ms": deviation}
        note = f"normal, mean {offset:g} ms, deviation {deviation:g} ms"
        close = offset >= 3 * deviation
        if not close:
            note += " (JMeter folds draws below 0 to their absolute value, Horde cuts them at 0)"
        self._pause(at, pause, note, Outcome.CONVERTED if close else Outcome.APPROXIMATED)

    def _PoissonRandomTimer(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        unresolved: list[str] = []
        offset, lam = (self._millis(conv, element, n, unresolved) for n in ("ConstantTimer.delay", "RandomTimer.range"))
        if offset is None or lam is None:
            conv.found(Outcome.NOT_CONVERTED, label, element, f"{', '.join(unresolved)} is not a number", anchor)
            return
        pause = {"type": "normal", "mean_ms": offset + lam, "stddev_ms": round(math.sqrt(lam), 3)}
        self._pause(
            at,
            pause,
            "a normal pause of the same mean and deviation",
            Outcome.APPROXIMATED,
        )

    def _extracted(
        self,
        at: Met,
        extractors: list[dict[str, Any]],
        differences: list[str],
    ) -> None:
        conv, element, scope, label, anchor = at.conv, at.element, at.scope, at.label, at.anchor
        jmeter_names = [str(extractor.pop("_jmeter")) for extractor in extractors]
        refused = engine_refuses(extract=extractors)
        if refused is not None:
            conv.found(Outcome.NOT_CONVERTED, label, element, _REFUSED.format(refused, "extracted"), anchor)
            return
        for name, extractor in zip(jmeter_names, extractors):
            scope.extract.append(extractor)
            var = extractor["var"]
            conv.names.variables[name] = var
            if extractor.get("pick") == "all":
                conv.names.lists.add(var)
                conv.names.variables[f"{name}_matchNr"] = f"({var} | length)"
                conv.names.variables[f"{name}_1"] = f"{var}[0]"
        shown = ", ".join(f"{e['var']} ({e['from']} {e.get('expression', '')})".replace(" )", ")") for e in extractors)
        conv.report(label, element, f"extractions of each request in its scope: {shown}", differences, anchor)

    def _extractor(
        self, name: str, source: str, expression: str | None, match: str, default: str | None, differences: list[str]
    ) -> dict[str, Any]:
        extractor: dict[str, Any] = {"var": identifier(name), "from": source, "_jmeter": name}
        if expression is not None:
            extractor["expression"] = expression
        match = match.strip() or "1"
        if match == "-1":
            extractor["pick"] = "all"
        elif match == "0":
            extractor["pick"] = "random"
        elif match != "1":
            differences.append(f"JMeter takes match {match}; the plan takes the first")
        if default is not None:
            extractor["default"] = default
        return extractor

    def _default(self, element: Node, prefix: str) -> str | None:
        default = element.prop(f"{prefix}default")
        if default or element.prop(f"{prefix}default_empty_value").lower() == "true":
            return default
        return None

    def _RegexExtractor(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        differences: list[str] = []
        headers = element.prop("RegexExtractor.useHeaders").lower()
        template = element.prop("RegexExtractor.template", "$1$")
        regex = element.prop("RegexExtractor.regex")
        if headers not in ("", "false", "code"):
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                f"it reads the {headers} field: Horde's regex reads the body",
                anchor,
            )
            return
        if template not in ("$1$", "$0$", ""):
            differences.append(f"its template {template}: the plan takes the first group")
        name = element.prop("RegexExtractor.refname")
        default = self._default(element, "RegexExtractor.")
        if headers == "code":
            extractor = self._extractor(name, "status", None, "1", default, differences)
            differences.append("it matched the status code with a regex; the plan takes the status")
        else:
            extractor = self._extractor(
                name, "regex", regex, element.prop("RegexExtractor.match_number"), default, differences
            )
        if default is None:
            differences.append(
                "nothing found counts an extract_failed error in Horde (JMeter leaves the variable unset)"
            )
        self._extracted(at, [extractor], differences)

    def _BoundaryExtractor(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        differences: list[str] = []
        if element.prop("BoundaryExtractor.useHeaders").lower() not in ("", "false"):
            conv.found(
                Outcome.NOT_CONVERTED, label, element, "it reads the headers: Horde's regex reads the body", anchor
            )
            return
        left, right = element.prop("BoundaryExtractor.lboundary"), element.prop("BoundaryExtractor.rboundary")
        regex = f"(?s){re.escape(left)}(.*?){re.escape(right)}"
        default = self._default(element, "BoundaryExtractor.")
        extractor = self._extractor(
            element.prop("BoundaryExtractor.refname"),
            "regex",
            regex,
            element.prop("BoundaryExtractor.match_number"),
            default,
            differences,
        )
        self._extracted(at, [extractor], differences)

    def _JSONPostProcessor(self, at: Met) -> None:
        element = at.element
        names = element.prop("JSONPostProcessor.referenceNames").split(";")
        expressions = element.prop("JSONPostProcessor.jsonPathExprs").split(";")
        matches = element.prop("JSONPostProcessor.match_numbers").split(";")
        defaults = element.prop("JSONPostProcessor.defaultValues").split(";")
        differences: list[str] = []
        extractors = []
        for index, (name, expression) in enumerate(zip(names, expressions)):
            match = matches[index] if index < len(matches) else "1"
            default = defaults[index] if index < len(defaults) and defaults[index] else None
            extractors.append(self._extractor(name.strip(), "json", expression.strip(), match, default, differences))
        if element.prop("JSONPostProcessor.compute_concat").lower() == "true":
            differences.append("JMeter also joins all matches in NAME_ALL; the plan does not")
        self._extracted(at, extractors, differences)

    def _XPathExtractor(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        query = element.prop("XPathExtractor.xpathQuery") or element.prop("XPathExtractor2.xpathQuery")
        name = element.prop("XPathExtractor.refname") or element.prop("XPathExtractor2.refname")
        text = re.fullmatch(r"//([A-Za-z_][\w.-]*)/text\(\)", query.strip())
        attribute = re.fullmatch(r"//([A-Za-z_][\w.-]*)/@([A-Za-z_][\w.-]*)", query.strip())
        if text is not None:
            regex = f"<{text.group(1)}(?:\\s[^>]*)?>([^<]*)</{text.group(1)}>"
        elif attribute is not None:
            regex = f"<{attribute.group(1)}\\s[^>]*\\b{attribute.group(2)}=[\"']([^\"']*)[\"']"
        else:
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                f"the XPath '{query}' is more than //TAG/text() or //TAG/@ATTR, which the plan reads with a regex",
                anchor,
            )
            return
        differences = [
            f"the XPath '{query}' read with the regex {regex} (the first match in the text, not a parsed document)"
        ]
        default = element.prop("XPathExtractor.default") or element.prop("XPathExtractor2.default") or None
        match = element.prop("XPathExtractor.matchNumber") or element.prop("XPathExtractor2.matchNumber") or "1"
        self._extracted(
            at,
            [self._extractor(name, "regex", regex, match, default, differences)],
            differences,
        )

    _XPath2Extractor = _XPathExtractor

    def _checked(
        self,
        at: Met,
        checks: list[dict[str, Any]],
        note: str,
        differences: list[str],
    ) -> None:
        conv, element, scope, label, anchor = at.conv, at.element, at.scope, at.label, at.anchor
        refused = engine_refuses(checks=checks)
        if refused is not None:
            conv.found(Outcome.NOT_CONVERTED, label, element, _REFUSED.format(refused, "checked"), anchor)
            return
        scope.checks.extend(checks)
        conv.report(label, element, f"checks of each request in its scope: {note}", differences, anchor)

    def _ResponseAssertion(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        test_field = element.prop("Assertion.test_field", "Assertion.response_data")
        test_type = (
            int(element.prop("Assertion.test_type", "16") or "16")
            if element.prop("Assertion.test_type", "16").isdigit()
            else -1
        )
        strings = [
            item.text
            for item in element.collection("Asserion.test_strings") or element.collection("Assertion.test_strings")
        ]
        negated, either = bool(test_type & 4), bool(test_type & 32)
        mode = test_type & ~(4 | 32)
        differences: list[str] = []
        if test_type < 0 or negated or not strings:
            why = "a negated assertion" if negated else "no pattern" if not strings else "an unknown test type"
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                f"{why}: the plan judges the response by its status (>= 400 is an error)",
                anchor,
            )
            return
        if test_field == "Assertion.response_code":
            if not all(s.strip().isdigit() and len(s.strip()) == 3 for s in strings) or mode not in (1, 2, 8, 16):
                conv.found(
                    Outcome.NOT_CONVERTED, label, element, f"status patterns {strings} that are not codes", anchor
                )
                return
            codes = sorted({int(s) for s in strings})
            if any(code >= 400 for code in codes) and element.prop("Assertion.assume_success").lower() != "true":
                differences.append(
                    "JMeter still failed a status >= 400 (its 'Ignore Status' unset); the plan's check accepts it"
                )
            if len(codes) > 1 and not either:
                differences.append(
                    "JMeter wanted every pattern to match the one code (never true); the plan takes any of them"
                )
            self._checked(
                at,
                [{"type": "status", "in": codes}],
                f"status in {codes}",
                differences,
            )
            return
        if test_field not in ("Assertion.response_data", "Assertion.response_data_as_document"):
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                f"it tests {test_field.removeprefix('Assertion.')}: Horde checks the status and body",
                anchor,
            )
            return
        if mode == 16:  # substring
            patterns = [re.escape(s) for s in strings]
            checks = [{"type": "body_contains", "text": s} for s in strings]
        elif mode == 8:  # equals
            patterns = [f"\\A{re.escape(s)}\\z" for s in strings]
            checks = [{"type": "body_matches", "pattern": p} for p in patterns]
        elif mode == 1:  # the whole body matches
            patterns = [f"\\A(?:{s})\\z" for s in strings]
            checks = [{"type": "body_matches", "pattern": p} for p in patterns]
        elif mode == 2:  # contains a match
            patterns = list(strings)
            checks = [{"type": "body_matches", "pattern": p} for p in patterns]
        else:
            conv.found(Outcome.NOT_CONVERTED, label, element, f"an unknown test type {test_type}", anchor)
            return
        if either and len(strings) > 1:
            checks = [{"type": "body_matches", "pattern": "|".join(f"(?:{p})" for p in patterns)}]
        if any("${" in s for s in strings):
            differences.append(
                "a pattern holds a JMeter variable, which a check does not read: it is matched as written"
            )
        self._checked(
            at,
            checks,
            ", ".join(json.dumps(c.get("text", c.get("pattern"))) for c in checks),
            differences,
        )

    def _JSONPathAssertion(self, at: Met) -> None:
        conv, element, label, anchor = at.conv, at.element, at.label, at.anchor
        path = element.prop("JSON_PATH")
        if element.prop("INVERT").lower() == "true" or element.prop("EXPECT_NULL").lower() == "true":
            conv.found(
                Outcome.NOT_CONVERTED,
                label,
                element,
                "an inverted or null-expecting assertion: the plan checks the status",
                anchor,
            )
            return
        check: dict[str, Any] = {"type": "json", "expression": path}
        differences: list[str] = []
        note = f"{path} is present"
        if element.prop("JSONVALIDATION").lower() == "true":
            expected = element.prop("EXPECTED_VALUE")
            if element.prop("ISREGEX", "true").lower() == "true" and re.escape(expected) != expected:
                conv.found(
                    Outcome.NOT_CONVERTED,
                    label,
                    element,
                    f"the value is matched by the regex '{expected}': Horde compares values",
                    anchor,
                )
                return
            try:
                check["equals"] = json.loads(expected)
            except ValueError:
                check["equals"] = expected
            if not isinstance(check["equals"], str):
                differences.append("JMeter compares text; the plan compares the JSON value")
            note = f"{path} equals {json.dumps(check['equals'])}"
        self._checked(at, [check], note, differences)

    def _DurationAssertion(self, at: Met) -> None:
        conv, element, scope, label, anchor = at.conv, at.element, at.scope, at.label, at.anchor
        unresolved: list[str] = []
        limit = self._millis(conv, element, "DurationAssertion.duration", unresolved)
        if limit is None or limit <= 0:
            conv.found(Outcome.NOT_CONVERTED, label, element, "its duration is not a number", anchor)
            return
        scope.max_ms.append(limit)
        conv.found(
            Outcome.APPROXIMATED,
            label,
            element,
            f"a threshold 'max < {limit:g}ms' on each request in its scope: JMeter fails each slower response, Horde "
            "judges the run by its slowest",
            anchor,
        )

    # --- the game team's timer ------------------------------------------------------------------

    def target_response_time(self, conv: Walk, element: Node, scope: Scope, label: str, quoted: str) -> None:
        scenario = conv.scenario_name
        assert scenario is not None  # a timer's scope is inside a thread group
        unresolved: list[str] = []
        target = conv.names.number("${TARGET_RESPONSE_TIME}", unresolved)
        differences: list[str] = []
        if target is None:
            target = DEFAULT_TARGET_MS
            differences.append(
                f"the plan gives TARGET_RESPONSE_TIME no number: the steering holds {DEFAULT_TARGET_MS} ms "
                "(change steer.target_ms)"
            )
        scope.pauses.append({"type": "constant", "duration_ms": STEERED_PAUSE_MS})
        if conv.steer is None:
            conv.steer = {
                "type": "target_response_time",
                "target_ms": target,
                "percentile": 50,
                "by": "pace",
                "start": 10,
                "min": round(STEERED_PAUSE_MS / 20000, 6),
                "max": STEERED_PAUSE_MS / 10,
                "scenarios": [],
            }
        conv.steer["scenarios"].append(scenario)
        note = (
            f"a script ({quoted}) that lengthened or shortened a sleep to hold TARGET_RESPONSE_TIME: the plan's "
            f"steering on the target response time (steer: by pace) does it, dividing a {STEERED_PAUSE_MS} ms pause "
            "before each request of its scope by the pace it steers; the script held the mean response time, the "
            "plan holds the median"
        )
        conv.found(Outcome.APPROXIMATED, label, element, "; ".join([note, *differences]), conv.plan)

    # --- a scenario's throughput timers -----------------------------------------------------------

    def finish_scenario(self, conv: Walk, document: dict[str, Any]) -> None:
        timers, self.throughput = self.throughput, []
        per_iteration = expected_requests(document.get("steps", []), conv)
        workload = document["workload"]
        for element, label in timers:
            raw = element.prop("throughput")
            if not is_number(raw) or float(raw) <= 0 or per_iteration <= 0:
                conv.found(
                    Outcome.NOT_CONVERTED, label, element, f"its throughput {raw} is not a positive number", document
                )
                continue
            if element.kind == "PreciseThroughputTimer":
                period = float(element.prop("throughputPeriod", "3600") or "3600")
                rate = float(raw) / period / per_iteration
                peak = max([int(conv.names.resolved_number(s.get("vus", 1))) for s in workload["stages"]] + [1])
                stages = [{"duration_s": s["duration_s"], "rate_per_s": round(rate, 6)} for s in workload["stages"]]
                document["workload"] = workload = {
                    "type": "open",
                    "start_rate_per_s": round(rate, 6),
                    "stages": stages,
                    "max_vus": peak,
                }
                conv.found(
                    Outcome.APPROXIMATED,
                    label,
                    element,
                    f"an open workload of {rate:.4g} iterations/s ({raw} samples per {period:g} s over {per_iteration:g} "
                    f"request(s) an iteration), at most {peak} VUs (the thread count): JMeter schedules each sample, "
                    "the plan each iteration",
                    workload,
                )
                continue
            if workload["type"] != "closed":
                conv.found(Outcome.NOT_CONVERTED, label, element, "an open workload's rate already paces it", document)
                continue
            mode = element.prop("calcMode", "0") or "0"
            per_vu = float(raw) / 60
            note = f"{raw} samples/min for each thread"
            if mode != "0":
                peak = max(int(conv.names.resolved_number(s["vus"])) for s in workload["stages"])
                per_vu /= max(peak, 1)
                note = f"{raw} samples/min over all threads, for {peak} VUs"
            pacing = round(per_iteration / per_vu, 6)
            document["pacing_s"] = pacing
            conv.found(
                Outcome.APPROXIMATED,
                label,
                element,
                f"pacing_s {pacing:g} ({note}, {per_iteration:g} request(s) an iteration): JMeter spaces each sample, "
                "the plan starts each iteration on time",
                document,
            )


def expected_requests(steps: Steps, conv: Walk) -> float:
    """How many requests a pass over ``steps`` sends on average (a choice by its weights, a loop
    by its count, an ``if`` as if it held)."""
    total = 0.0
    for step in steps:
        kind = step.get("type", "http")
        if kind == "http":
            total += 1
        elif kind in ("group", "parallel"):
            total += expected_requests(step["steps"], conv)
        elif kind == "choice":
            weights = sum(float(b["weight"]) for b in step["branches"])
            total += sum(float(b["weight"]) * expected_requests(b["steps"], conv) for b in step["branches"]) / weights
        elif kind == "loop":
            count = step.get("count", 1)
            total += conv.names.resolved_number(count) * expected_requests(step["steps"], conv)
        elif kind == "if":
            total += expected_requests(step.get("then", []), conv)
    return total
