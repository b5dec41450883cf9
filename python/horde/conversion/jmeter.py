"""JMeter test plans (.jmx) as Horde plans: :func:`convert_jmx`.

The tree is walked as JMeter runs it. A thread group becomes a scenario (its workload from
:mod:`horde.conversion.jmeter_threads`); its HTTP samplers become ``http`` steps in order;
controllers become Horde's control flow (Throughput, Random and Interleave → weighted
``choice``; Loop, While, If → ``loop`` and ``if`` where the expression is plain; Transaction →
``group``; Simple → inlined; Module and Include → the referred part inlined; Once Only →
``setup``). Configuration applies to what is in its scope, as in JMeter: HTTP Request Defaults
give the target, Header Managers the target's, the scenario's or the steps' headers, CSV Data
Sets feeders, User Defined Variables and ``${__P(name,default)}`` parameters; timers become a
pause before each request in their scope, extractors and assertions the extractions and checks
of each request in their scope.

Every element met gets one finding (:mod:`horde.conversion.findings`) at ``file:line``: what it
became, how the plan differs, or why it was left out and what the plan does instead. A script
(JSR223, BeanShell, BSF) is never run or translated: its finding quotes its first lines. The
game team's JSR223 timer that keeps a ``TARGET_RESPONSE_TIME`` becomes Horde's steering on the
target response time (``steer``), which does what it did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from horde.conversion.credentials import Credentials
from horde.conversion.findings import Conversion, Outcome
from horde.conversion.jmeter_controllers import JmeterControllers
from horde.conversion.jmeter_rules import JmeterRules, Scope, engine_refuses
from horde.conversion.jmeter_text import Names, Parameter, identifier
from horde.conversion.jmeter_threads import arrivals, concurrency, free_form_arrivals, standard, ultimate
from horde.conversion.jmeter_xml import Node, pairs, read_jmx, walk
from horde.errors import InvalidInput
from horde.plan import METHODS
from horde.plan.feeders import check_feeder_file, count_rows, feeder_columns
from horde.plan.redaction import is_secret_header

__all__ = ["convert_jmx"]

#: Include Controllers nest at most this deep (a plan includes a fragment that includes another).
MAX_INCLUDE_DEPTH = 8
#: A script's first lines quoted in its finding, and how long each may be.
SCRIPT_LINES = 6
SCRIPT_LINE_CHARS = 160

_BODYMETHODS = {"POST", "PUT", "PATCH"}
_SAMPLERS = {"HTTPSamplerProxy", "HTTPSampler", "HTTPSampler2"}
_THREAD_GROUPS = {
    "ThreadGroup": standard,
    "ConcurrencyThreadGroup": concurrency,
    "UltimateThreadGroup": ultimate,
    "ArrivalsThreadGroup": arrivals,
    "FreeFormArrivalsThreadGroup": free_form_arrivals,
}
_INLINED = {"GenericController", "RecordingController", "CriticalSectionController"}
_EXTRACTORS = {"RegexExtractor", "JSONPostProcessor", "BoundaryExtractor", "XPathExtractor", "XPath2Extractor"}
_ASSERTIONS = {"ResponseAssertion", "JSONPathAssertion", "DurationAssertion"}
_TIMERS = {"ConstantTimer", "UniformRandomTimer", "GaussianRandomTimer", "PoissonRandomTimer"}
_THROUGHPUT_TIMERS = {"ConstantThroughputTimer", "PreciseThroughputTimer"}
_NOT_NEEDED = "not needed: Horde stores every run (every second, with exact latency histograms)"


def convert_jmx(path: Path) -> Conversion:
    """Converts the JMeter test plan at ``path``; bad XML, or a file that is not a JMeter plan, is
    an :class:`~horde.errors.InvalidInput` located at its line."""
    return _Converter(Path(path)).convert()


@dataclass
class _Scenario:
    name: str
    document: dict[str, Any]
    used_names: set[str] = field(default_factory=set)
    feeders: list[dict[str, Any]] = field(default_factory=list)
    setup: list[dict[str, Any]] = field(default_factory=list)

    def unique(self, name: str) -> str:
        base = name.strip() or "request"
        candidate, count = base, 1
        while candidate in self.used_names:
            count += 1
            candidate = f"{base} {count}"
        self.used_names.add(candidate)
        return candidate


@dataclass
class _Pending:
    outcome: Outcome
    location: str
    element: str
    note: str
    #: The plan's part the finding is about (a dict or list of the plan document), or None for the plan.
    anchor: object = None


class _Converter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        self.names = Names()
        self.rules = JmeterRules()
        self.controllers = JmeterControllers()
        #: Credentials the source holds literally (headers, bodies, queries): parameters the user gives.
        self.credentials = Credentials()
        self.pending: list[_Pending] = []
        self.target: dict[str, Any] = {}
        self.base: tuple[str, str, str] | None = None  # scheme, host[:port], path prefix
        #: Where the target's server was named (``file:line``).
        self.base_at = f"{self.label}:1"
        self.plan: dict[str, Any] = {"version": 1, "name": path.stem or "plan"}
        self.scenarios: list[dict[str, Any]] = []
        self.thresholds: list[dict[str, Any]] = []
        self.steer: dict[str, Any] | None = None
        self.root_tree: Node | None = None
        self.includes: list[Path] = []
        self.modules: list[int] = []
        self.scenario: _Scenario | None = None
        #: The scenario's own scope: a Header Manager there gives the scenario's headers.
        self.scenario_scope: Scope | None = None
        #: CSV Data Sets at the plan's level: every scenario reads them.
        self.plan_feeders: list[dict[str, Any]] = []
        #: Test fragments: their parts are found where a Module or Include Controller inlines them.
        self.fragments: list[Node | None] = []
        #: Each feeder's finding, which a later check of its rows may amend.
        self.feeder_findings: dict[int, _Pending] = {}
        #: The elements that have a finding (by identity), so that a fragment nothing inlined is reported.
        self.seen: set[int] = set()

    @property
    def scenario_name(self) -> str | None:
        """The name of the scenario being converted (None outside a thread group)."""
        return self.scenario.name if self.scenario is not None else None

    # --- findings -------------------------------------------------------------------------------

    def found(self, outcome: Outcome, label: str, node: Node, note: str, anchor: object = None) -> None:
        self.seen.add(id(node))
        element = f"{node.kind} '{node.name}'" if node.name != node.tag else node.kind
        self.pending.append(_Pending(outcome, f"{label}:{node.line}", element, note, anchor))

    def report(self, label: str, node: Node, note: str, differences: list[str], anchor: object) -> None:
        """Converted, or approximated with how the plan differs when it does."""
        outcome = Outcome.APPROXIMATED if differences else Outcome.CONVERTED
        self.found(outcome, label, node, "; ".join([note, *differences]), anchor)

    def inner_steps(
        self, element: Node, tree: Node | None, scope: Scope, label: str, siblings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """A controller's steps; a controller with no request inside is reported as such."""
        steps = self.children(tree, scope.inner(), label)
        if not steps:
            self.found(Outcome.NOT_CONVERTED, label, element, "no request inside: nothing to convert", siblings)
        return steps

    def left_out(self, label: str, element: Node, tree: Node | None, note: str, anchor: object) -> list[dict[str, Any]]:
        """An element not converted, and every element under it with it; no steps."""
        self.found(Outcome.NOT_CONVERTED, label, element, note, anchor)
        self.skipped(label, tree, f"inside {element.kind} '{element.name}', which was not converted", anchor)
        return []

    def skipped(self, label: str, tree: Node | None, why: str, anchor: object) -> None:
        """A finding for every element under a part that was not converted."""
        for element, subtree in pairs(tree):
            self.found(Outcome.NOT_CONVERTED, label, element, why, anchor)
            self.skipped(label, subtree, why, anchor)

    # --- the plan -------------------------------------------------------------------------------

    def convert(self) -> Conversion:
        root = read_jmx(self.path, self.label)
        top = next((child for child in root.children if child.tag == "hashTree"), None)
        plan_pairs = list(pairs(top))
        if not plan_pairs or plan_pairs[0][0].kind != "TestPlan":
            raise InvalidInput(
                f"{self.label}:{root.line}: a JMeter plan whose first element is not a TestPlan",
                hint="give a test plan JMeter saved (File > Save Test Plan as), a .jmx file",
            )
        self.root_tree = top
        test_plan, tree = plan_pairs[0]
        if test_plan.name and test_plan.name != "TestPlan":
            self.plan["name"] = test_plan.name
        self.found(Outcome.CONVERTED, self.label, test_plan, "the plan (its name)")
        self.arguments(test_plan, self.label)
        scope = Scope()
        groups: list[tuple[Node, Node | None]] = []
        for element, subtree in pairs(tree):
            # Before the enabled check: JMeter saves fragments disabled, and runs them where referred to.
            if element.kind == "TestFragmentController":
                self.found(
                    Outcome.CONVERTED,
                    self.label,
                    element,
                    "a fragment JMeter runs only where a Module or Include Controller refers to it; "
                    "the plan inlines it there",
                )
                self.fragment_findings(subtree)
            elif not element.enabled:
                self.disabled(element, subtree, self.label, self.plan)
            elif element.kind in _THREAD_GROUPS or element.kind in ("SetupThreadGroup", "PostThreadGroup"):
                groups.append((element, subtree))
            else:
                self.configure(element, subtree, scope, self.label, plan_level=True)
        for element, subtree in groups:
            self.thread_group(element, subtree, scope)
        for fragment in self.fragments:
            for part in walk(fragment):
                if id(part) not in self.seen:
                    self.found(
                        Outcome.NOT_CONVERTED,
                        self.label,
                        part,
                        "in a test fragment that no Module or Include Controller refers to: JMeter never runs it",
                        self.plan,
                    )
        if not self.scenarios:
            raise InvalidInput(
                f"{self.label}: no thread group with an HTTP request Horde can send",
                hint="a plan needs an enabled thread group with at least one enabled HTTP Request sampler",
            )
        self.plan["target"] = self.target_document()
        if self.names.parameters:
            self.plan = {"version": 1, "name": self.plan["name"], "parameters": {}, **self.plan}
            self.plan["parameters"] = self.names.typed_parameters()
        self.plan["scenarios"] = self.scenarios
        if self.thresholds:
            self.plan["thresholds"] = self.thresholds
        if self.steer is not None:
            self.plan["steer"] = self.steer
        return self.conversion()

    def conversion(self) -> Conversion:
        paths: dict[int, tuple[str | int, ...]] = {}

        def index(node: Any, at: tuple[str | int, ...]) -> None:
            if isinstance(node, dict):
                paths.setdefault(id(node), at)
                for key, value in node.items():
                    index(value, (*at, key))
            elif isinstance(node, list):
                paths.setdefault(id(node), at)
                for position, value in enumerate(node):
                    index(value, (*at, position))

        index(self.plan, ())
        result = Conversion(source=self.path, source_format="jmeter", plan=self.plan)
        for item in self.pending:
            result.add(item.outcome, item.location, item.element, item.note, paths.get(id(item.anchor), ()))
        return result

    def target_document(self) -> dict[str, Any]:
        if self.base is None:
            self.base = ("http", "127.0.0.1:8080", "")
            self.pending.append(
                _Pending(
                    Outcome.APPROXIMATED,
                    f"{self.label}:1",
                    "target",
                    "no HTTP Request Defaults or sampler names a server: the plan's target is http://127.0.0.1:8080 "
                    "(change target.base_url)",
                )
            )
        scheme, host, prefix = self.base
        base_url = f"{scheme}://{host}{prefix}"
        refused = engine_refuses(base_url=base_url, parameters=self.names.typed_parameters())
        if refused is not None:
            self.pending.append(
                _Pending(
                    Outcome.NOT_CONVERTED,
                    self.base_at,
                    "target",
                    f"the server {base_url} is not one Horde can reach ({refused}): the plan's target is "
                    "http://127.0.0.1:8080 (change target.base_url)",
                )
            )
            base_url = "http://127.0.0.1:8080"
        return {"base_url": base_url, **self.target}

    # --- configuration --------------------------------------------------------------------------

    def arguments(self, node: Node, label: str) -> None:
        """User Defined Variables (a TestPlan's or an ``Arguments`` element's) → parameters."""
        for argument in node.collection("Arguments.arguments"):
            name = argument.prop("Argument.name") or argument.attrs.get("name", "")
            value = argument.prop("Argument.value")
            if not name:
                continue
            unresolved: list[str] = []
            whole = re.fullmatch(r"\s*\$\{([^{}]*)\}\s*", value)
            expression = self.names.reference(whole.group(1)) if whole is not None else None
            if expression is not None and expression.startswith("params."):
                self.names.variables[name] = expression
                note = f"the parameter {expression.removeprefix('params.')} ({{{{ {expression} }}}})"
            elif "${" in value:
                self.names.template(value, unresolved)
                parameter = self.names.parameter(name, value)
                self.names.variables[name] = f"params.{parameter}"
                note = f"the parameter {parameter}, whose default is the text as JMeter wrote it"
            else:
                parameter = self.names.parameter(name, value)
                self.names.variables[name] = f"params.{parameter}"
                note = f"the parameter {parameter} (-p {parameter}=...; its default '{value}')"
            if self.names.parameters[self.names.variables[name].removeprefix("params.")].secret:
                note = f"{note.split(' (')[0]}, a credential: its value is not written to the plan (give it with -p)"
            outcome = Outcome.APPROXIMATED if unresolved else Outcome.CONVERTED
            if unresolved:
                note += f"; {', '.join(unresolved)} in its value is not turned over"
            self.pending.append(
                _Pending(outcome, f"{label}:{argument.line}", f"User Defined Variable '{name}'", note, self.plan)
            )

    def configure(self, element: Node, subtree: Node | None, scope: Scope, label: str, *, plan_level: bool) -> bool:
        """Applies a configuration, timer, extractor or assertion to ``scope``; False when the
        element is none of these (a controller or sampler the caller walks)."""
        kind = element.kind
        anchor: object = self.plan if plan_level or self.scenario is None else self.scenario.document
        if kind == "Arguments":
            self.arguments(element, label)
            self.found(Outcome.CONVERTED, label, element, "its variables are the plan's parameters", anchor)
        elif kind == "ConfigTestElement" and "HttpDefaults" in element.attrs.get("guiclass", ""):
            self.http_defaults(element, label, anchor)
        elif kind == "HeaderManager":
            refused: list[str] = []
            headers = self.headers(element, refused)
            if plan_level:
                self.target.setdefault("headers", {}).update(headers)
                where = "the target's headers, sent with every request"
            elif self.scenario is not None and scope is self.scenario_scope:
                self.scenario.document.setdefault("headers", {}).update(headers)
                where = "the scenario's headers"
            else:
                scope.headers.update(headers)
                where = "the headers of each request in its scope"
            differences = [f"'{name}' is not a header name HTTP allows: left out" for name in refused]
            self.report(label, element, f"{', '.join(headers) or 'no headers'}: {where}", differences, anchor)
        elif kind == "CookieManager":
            clear = element.prop("CookieManager.clearEachIteration").lower() == "true"
            note = "Horde keeps each VU's cookies (a jar by name and path) and sends them back: no setting needed"
            if clear:
                note += "; JMeter clears them each iteration, Horde keeps them for the VU's life"
            self.found(Outcome.APPROXIMATED if clear else Outcome.CONVERTED, label, element, note, anchor)
        elif kind == "CSVDataSet":
            self.csv_data_set(element, label, anchor)
        elif kind == "RandomVariableConfig":
            variable = element.prop("variableName")
            low, high = element.prop("minimumValue", "1"), element.prop("maximumValue", "1")
            if variable and re.fullmatch(r"-?\d+", low) and re.fullmatch(r"-?\d+", high):
                self.names.variables[variable] = f"random_int({low}, {high})"
                self.found(Outcome.CONVERTED, label, element, f"{variable} is random_int({low}, {high}) where used")
            else:
                self.found(Outcome.NOT_CONVERTED, label, element, "a range that is not two integers", anchor)
        elif kind in _TIMERS or kind in _THROUGHPUT_TIMERS or kind in _EXTRACTORS or kind in _ASSERTIONS:
            self.rules.apply(self, element, scope, label, anchor)
        elif _is_script(element):
            self.script(element, scope, label, anchor)
        elif _is_listener(element):
            self.found(Outcome.NOT_CONVERTED, label, element, _NOT_NEEDED, anchor)
        elif plan_level:
            self.left_out(label, element, subtree, "an element Horde has no equal for", anchor)
        else:
            return False
        return True

    def http_defaults(self, element: Node, label: str, anchor: object) -> None:
        differences = self.timeouts(element)
        if element.prop("HTTPSampler.image_parser").lower() == "true":
            differences.append(_EMBEDDED)
        unresolved: list[str] = []
        scheme = (element.prop("HTTPSampler.protocol") or "http").lower()
        host = element.prop("HTTPSampler.domain")
        port = element.prop("HTTPSampler.port")
        prefix = element.prop("HTTPSampler.path")
        if not host:
            self.report(label, element, "no server named: the target comes from the samplers", differences, anchor)
            return
        base = (scheme, host + (f":{port}" if port else ""), prefix.rstrip("/") if prefix.startswith("/") else "")
        if "${" in "".join(base):
            fixed = tuple(self.names.template(part, unresolved) for part in base)
            base = (fixed[0], fixed[1], fixed[2])
        if self.base is None or self.base == base:
            self.base = base
            self.base_at = f"{label}:{element.line}"
            if unresolved:
                differences.append(f"{', '.join(unresolved)} is not turned over")
            self.report(label, element, f"the target {base[0]}://{base[1]}{base[2]}", differences, anchor)
        else:
            self.found(
                Outcome.APPROXIMATED,
                label,
                element,
                f"a second server {base[1]}: Horde's plan has one target, {self.base[1]}; its requests go there",
                anchor,
            )

    def timeouts(self, element: Node) -> list[str]:
        """HTTP Request Defaults' timeouts as the target's, when the plan layer takes them."""
        differences: list[str] = []
        for prop, key in (
            ("HTTPSampler.connect_timeout", "connect_timeout_ms"),
            ("HTTPSampler.response_timeout", "request_timeout_ms"),
        ):
            value = element.prop(prop)
            if not value:
                continue
            if not value.isdigit() or engine_refuses(target={key: int(value)}) is not None:
                differences.append(f"its {prop.removeprefix('HTTPSampler.')} '{value}' is not a timeout the plan takes")
                continue
            self.target[key] = int(value)
            if key == "request_timeout_ms":
                differences.append(
                    f"its response timeout {value} ms bounds the wait between bytes in JMeter, the whole exchange in Horde"
                )
        return differences

    def headers(self, element: Node, refused: list[str]) -> dict[str, str]:
        """A Header Manager's headers; a name HTTP does not allow is left out, in ``refused``."""
        headers: dict[str, str] = {}
        unresolved: list[str] = []
        for header in element.collection("HeaderManager.headers"):
            name = header.prop("Header.name").strip()
            if not name:
                continue
            if engine_refuses(headers={name: "x"}) is not None:
                refused.append(name)
                continue
            value = self.names.template(header.prop("Header.value"), unresolved)
            headers[name] = self.credential(self.credentials.header(name, value)) or value
        return headers

    def credential(self, written: str | None) -> str | None:
        """``written`` (what a credential became), once the parameters it names are the plan's."""
        for name in self.credentials.parameters:
            self.names.parameters.setdefault(name, Parameter("", secret=True))
        self.credentials.taken |= {name.lower() for name in self.names.parameters}
        return written

    def csv_data_set(self, element: Node, label: str, anchor: object) -> None:
        filename = element.prop("filename")
        path = self.path.parent / filename
        fault = check_feeder_file(str(path), "csv") if filename and "${" not in filename else None
        header = feeder_columns(str(path), "csv") if filename and fault is None else None
        named = [c.strip() for c in element.prop("variableNames").split(",") if c.strip()]
        first_line_skipped = element.prop("ignoreFirstLine").lower() == "true"
        why = None
        if not filename or "${" in filename:
            why = f"a file name Horde cannot read before the run: '{filename}'"
        elif fault is not None or header is None:
            why = f"{filename} beside the plan: {fault.message if fault else 'no header line'}"
        elif named and (not first_line_skipped or any(column not in header for column in named)):
            why = (
                f"JMeter names the columns ({', '.join(named)}); Horde reads them from the file's first line "
                f"({', '.join(header)}): put the line '{','.join(named)}' at the top of {filename}"
            )
        if why is not None:
            self.found(Outcome.NOT_CONVERTED, label, element, f"{why}; the plan has no feeder for it", anchor)
            return
        assert header is not None
        differences: list[str] = []
        delimiter = element.prop("delimiter", ",") or ","
        if delimiter != ",":
            differences.append(f"its delimiter '{delimiter}': Horde's CSV feeders read commas")
        recycle = element.prop("recycle", "true").lower() != "false"
        mode = "circular" if recycle else "unique"
        if not recycle:
            differences.append(
                "JMeter reads each line once across all threads; 'unique' gives each VU its own line for life"
            )
        if element.prop("shareMode") not in ("", "shareMode.all"):
            differences.append(f"its sharing ({element.prop('shareMode')}): Horde's feeder is shared by every VU")
        name = identifier(Path(filename).stem)
        feeder = {"name": name, "path": filename, "format": "csv", "mode": mode}
        target = self.scenario.feeders if self.scenario is not None else self.plan_feeders
        if all(existing["name"] != name for existing in target):
            target.append(feeder)
        columns = [column for column in (named or header) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column)]
        for column in columns:
            self.names.variables[column] = f"{name}.{column}"
        note = f"the feeder '{name}' ({mode}) reading {filename} beside the plan (the file is referred to, not copied)"
        if columns:
            note += f"; {', '.join(columns)} are {{{{ {name}.COLUMN }}}}"
        self.report(label, element, note, differences, feeder)
        self.feeder_findings[id(feeder)] = self.pending[-1]

    def unique_feeders_fit(self, document: dict[str, Any]) -> None:
        """A ``unique`` feeder with fewer rows than the scenario's VUs would refuse the run: it
        cycles instead, and its finding says so."""
        workload = document["workload"]
        levels = [workload.get("max_vus", 0), workload.get("start_vus", 0)]
        levels += [stage.get("vus", 0) for stage in workload["stages"]]
        peak = max(self.names.resolved_number(level) for level in levels)
        for feeder in document.get("feeders", []):
            rows = count_rows(str(self.path.parent / feeder["path"]), "csv") if feeder["mode"] == "unique" else None
            if rows is not None and rows < peak:
                feeder["mode"] = "circular"
                finding = self.feeder_findings.get(id(feeder))
                if finding is not None:
                    finding.outcome = Outcome.APPROXIMATED
                    finding.note += f"; {rows} lines for {peak:g} VUs: the plan cycles through them ('circular')"

    def script(self, element: Node, scope: Scope, label: str, anchor: object) -> None:
        code = element.prop("script") or element.prop("BeanShellSampler.query") or element.prop("query")
        file = element.prop("filename") or element.prop("BeanShellSampler.filename")
        lines = [_masked(line.rstrip())[:SCRIPT_LINE_CHARS] for line in code.strip().splitlines()[:SCRIPT_LINES]]
        quoted = " | ".join(line.strip() for line in lines if line.strip()) or (
            f"the file {file}" if file else "no code"
        )
        more = " ..." if len(code.strip().splitlines()) > SCRIPT_LINES else ""
        kind = element.kind
        if "Timer" in kind and "TARGET_RESPONSE_TIME" in code and self.scenario is not None:
            self.rules.target_response_time(self, element, scope, label, quoted + more)
            return
        if "Sampler" in kind:
            instead = "the plan sends nothing in its place"
        elif "PreProcessor" in kind:
            instead = "the plan sends the next request without what it prepared (use a feeder, a template function or an extraction)"
        elif "PostProcessor" in kind:
            instead = "the plan reads nothing from the response here (use an extraction: json, regex, header)"
        elif "Timer" in kind:
            instead = "the plan does not pause for it (the other timers' pauses stay)"
        elif "Assertion" in kind:
            instead = "the plan judges the response by its checks and status (>= 400 is an error)"
        else:
            instead = "the plan does without it"
        self.found(
            Outcome.NOT_CONVERTED, label, element, f"a script is not translated: {quoted}{more}; {instead}", anchor
        )

    def disabled(self, element: Node, subtree: Node | None, label: str, anchor: object) -> None:
        self.found(
            Outcome.NOT_CONVERTED,
            label,
            element,
            "disabled in JMeter (enabled=\"false\"): not run, not converted",
            anchor,
        )
        self.skipped(label, subtree, f"inside the disabled {element.kind} '{element.name}'", anchor)

    def fragment_findings(self, subtree: Node | None) -> None:
        """The parts of a test fragment are found where they are inlined; one never referred to
        is reported once here."""
        self.fragments.append(subtree)

    # --- thread groups --------------------------------------------------------------------------

    def thread_group(self, element: Node, subtree: Node | None, plan_scope: Scope) -> None:
        label = self.label
        if element.kind in ("SetupThreadGroup", "PostThreadGroup"):
            why = "Horde has no run-wide setUp/tearDown: put a VU's own setup in a scenario's setup steps"
            self.left_out(label, element, subtree, why, self.plan)
            return
        unresolved: list[str] = []
        workload, differences = _THREAD_GROUPS[element.kind](element, self.names, unresolved)
        on_error = element.prop("ThreadGroup.on_sample_error", "continue") or "continue"
        if on_error != "continue":
            differences.append(
                f"JMeter's action after a sampler error ({on_error}) is not kept: the plan goes on with the "
                "iteration (a step's on_check_failure: end_iteration ends it)"
            )
        refused = engine_refuses(workload=workload, parameters=self.names.typed_parameters())
        if refused is not None:
            differences.append(f"its numbers make no workload ({refused}): the plan holds 1 VU for 60 s")
            workload = {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 60, "vus": 1}]}
        names = [s["name"] for s in self.scenarios]
        name = element.name
        while name in names:
            name += " 2"
        document: dict[str, Any] = {"name": name}
        self.scenario = _Scenario(name, document)
        saved = dict(self.names.variables)
        scope = plan_scope.inner()
        self.scenario_scope = scope
        steps = self.children(subtree, scope, label)
        if self.scenario.setup:
            document["setup"] = self.scenario.setup
        feeders = [*self.plan_feeders, *self.scenario.feeders]
        if feeders:
            document["feeders"] = feeders
        document["steps"] = steps
        document["workload"] = workload
        self.rules.finish_scenario(self, document)
        self.unique_feeders_fit(document)
        self.names.variables = saved
        if not steps:
            self.found(
                Outcome.NOT_CONVERTED, label, element, "no HTTP request Horde can send in it: no scenario", self.plan
            )
            self.scenario = None
            return
        self.scenarios.append(document)
        if unresolved:
            differences.append(f"{', '.join(unresolved)} is not a number the plan can hold")
        workload = document["workload"]  # a throughput timer may have made it open
        note = f"the scenario '{name}', a {workload['type']} workload with {len(workload['stages'])} stage(s)"
        self.report(label, element, note, differences, document)
        self.scenario = None

    # --- controllers and samplers ---------------------------------------------------------------

    def children(self, tree: Node | None, scope: Scope, label: str) -> list[dict[str, Any]]:
        """The steps of a controller's children: its configuration applied first (JMeter applies
        it to its whole scope, wherever it stands), then its samplers and controllers in order."""
        items = list(pairs(tree))
        rest: list[tuple[Node, Node | None]] = []
        for element, subtree in items:
            if not element.enabled:
                self.disabled(element, subtree, label, self.scenario.document if self.scenario else self.plan)
            elif not self.configure(element, subtree, scope, label, plan_level=False):
                rest.append((element, subtree))
        steps: list[dict[str, Any]] = []
        for element, subtree in rest:
            steps.extend(self.element(element, subtree, scope, label, steps))
        return steps

    def element(
        self, element: Node, subtree: Node | None, scope: Scope, label: str, siblings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        kind = element.kind
        if kind in _SAMPLERS:
            return self.sampler(element, subtree, scope, label, siblings)
        if kind in _INLINED:
            steps = self.children(subtree, scope.inner(), label)
            note = "its children inlined" if steps else "no request inside"
            if kind == "CriticalSectionController":
                note += "; Horde's VUs share no state to lock"
            self.found(Outcome.CONVERTED, label, element, note, steps[0] if steps else siblings)
            return steps
        if kind == "TransactionController":
            # Named before its children: the group keeps JMeter's name, a request of the same name is renamed.
            name = self.scenario.unique(element.name) if self.scenario else element.name
            steps = self.inner_steps(element, subtree, scope, label, siblings)
            if not steps:
                return []
            group = {"type": "group", "name": name, "steps": steps}
            self.found(Outcome.CONVERTED, label, element, f"the group '{group['name']}' (its time is recorded)", group)
            return [group]
        if kind == "OnceOnlyController":
            return self.once_only(element, subtree, scope, label, siblings)
        if kind in ("ModuleController", "IncludeController"):
            return self.inline(element, scope, label, siblings)
        return self.controllers.controller(self, element, subtree, scope, label, siblings)

    def once_only(
        self, element: Node, subtree: Node | None, scope: Scope, label: str, siblings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        scenario = self.scenario
        steps = self.inner_steps(element, subtree, scope, label, siblings)
        if not steps:
            return []
        if scenario is not None and scope is self.scenario_scope and not siblings and not scenario.setup:
            scenario.setup.extend(steps)
            self.found(
                Outcome.CONVERTED, label, element, "the scenario's setup: each VU runs it once, first", scenario.setup
            )
            return []
        block = {"type": "if", "condition": "iteration == 0", "then": steps}
        self.found(
            Outcome.CONVERTED, label, element, "runs in each VU's first iteration only (if iteration == 0)", block
        )
        return [block]

    def inline(self, element: Node, scope: Scope, label: str, siblings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]]
        if element.kind == "ModuleController":
            path = [item.text.strip() for item in element.collection("ModuleController.node_path")]
            found = self.module_target(path)
            if found is None:
                self.found(
                    Outcome.NOT_CONVERTED, label, element, f"its module {' > '.join(path)} is not in the plan", siblings
                )
                return []
            target, tree = found
            if id(target) in self.modules:
                self.found(
                    Outcome.NOT_CONVERTED,
                    label,
                    element,
                    "its module contains this controller: a loop, refused",
                    siblings,
                )
                return []
            self.modules.append(id(target))
            try:
                if target.kind == "TestFragmentController":
                    self.seen.add(id(target))
                    steps = self.children(tree, scope.inner(), self.label)
                else:
                    steps = self.element(target, tree, scope.inner(), self.label, siblings)
            finally:
                self.modules.pop()
            self.found(
                Outcome.CONVERTED, label, element, f"{' > '.join(path)} inlined here", steps[0] if steps else siblings
            )
            return steps
        include = element.prop("IncludeController.includepath")
        file = (self.path.parent / include).resolve()
        if (
            not include
            or len(self.includes) >= MAX_INCLUDE_DEPTH
            or file in self.includes
            or file == self.path.resolve()
        ):
            why = (
                "no file named"
                if not include
                else (
                    f"includes nest deeper than {MAX_INCLUDE_DEPTH}"
                    if len(self.includes) >= MAX_INCLUDE_DEPTH
                    else "it includes itself: a loop, refused"
                )
            )
            self.found(Outcome.NOT_CONVERTED, label, element, why, siblings)
            return []
        included_label = str(self.path.parent / include)
        try:
            root = read_jmx(file, included_label)
        except InvalidInput as error:
            self.found(
                Outcome.NOT_CONVERTED, label, element, f"the included file cannot be read: {error.message}", siblings
            )
            return []
        top = next((child for child in root.children if child.tag == "hashTree"), None)
        self.includes.append(file)
        steps = []
        try:
            for plan_element, tree in pairs(top):
                self.found(Outcome.CONVERTED, included_label, plan_element, "the included plan's root", siblings)
                for part, part_tree in pairs(tree):
                    if part.kind == "TestFragmentController":
                        self.found(Outcome.CONVERTED, included_label, part, "inlined where it is included", siblings)
                        steps.extend(self.children(part_tree, scope.inner(), included_label))
                    else:
                        wrapper = Node("hashTree", {}, part.line, [part] + ([part_tree] if part_tree else []))
                        steps.extend(self.children(wrapper, scope.inner(), included_label))
        finally:
            self.includes.pop()
        self.found(Outcome.CONVERTED, label, element, f"{include} inlined here", steps[0] if steps else siblings)
        return steps

    def module_target(self, path: list[str]) -> tuple[Node, Node | None] | None:
        for start in range(len(path)):
            found = self._descend(self.root_tree, path[start:])
            if found is not None:
                return found
        return None

    def _descend(self, tree: Node | None, path: list[str]) -> tuple[Node, Node | None] | None:
        if not path:
            return None
        for element, subtree in pairs(tree):
            if element.name == path[0]:
                if len(path) == 1:
                    return element, subtree
                deeper = self._descend(subtree, path[1:])
                if deeper is not None:
                    return deeper
        return None

    def sampler(
        self, element: Node, subtree: Node | None, scope: Scope, label: str, siblings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        scenario = self.scenario
        assert scenario is not None  # samplers are reached through a thread group
        method = (element.prop("HTTPSampler.method") or "GET").upper()
        if method not in METHODS:
            why = f"the method {method}: Horde sends {', '.join(METHODS)}"
            return self.left_out(label, element, subtree, why, siblings)
        own = scope.inner()
        # The sampler's own children (headers, extractors, assertions, timers) apply to it alone.
        for child, child_tree in pairs(subtree):
            if not child.enabled:
                self.disabled(child, child_tree, label, siblings)
            elif not self.configure(child, child_tree, own, label, plan_level=False):
                self.found(
                    Outcome.NOT_CONVERTED, label, child, "an element Horde has no equal for, under a sampler", siblings
                )
        unresolved: list[str] = []
        differences: list[str] = []
        raw_path = element.prop("HTTPSampler.path")
        scheme, host = element.prop("HTTPSampler.protocol").lower(), element.prop("HTTPSampler.domain")
        port = element.prop("HTTPSampler.port")
        if re.match(r"https?://", raw_path, re.IGNORECASE):
            parts = urlsplit(raw_path)
            scheme, host, port = parts.scheme.lower(), parts.hostname or "", str(parts.port or "")
            raw_path = parts.path + (f"?{parts.query}" if parts.query else "")
        if host:
            here = (scheme or "http", host + (f":{port}" if port else ""), "")
            if self.base is None:
                self.base = here
                self.base_at = f"{label}:{element.line}"
            elif (here[0], here[1]) != (self.base[0], self.base[1]):
                differences.append(f"JMeter sends it to {here[0]}://{here[1]}; the plan's one target is {self.base[1]}")
        path = self.names.url_template(raw_path if raw_path.startswith("/") else "/" + raw_path, unresolved)
        body: str | None = None
        arguments = element.collection("Arguments.arguments")
        raw_body = element.prop("HTTPSampler.postBodyRaw").lower() == "true"
        headers = dict(own.headers)
        if raw_body and arguments:
            body = self.names.template(arguments[0].prop("Argument.value"), unresolved)
        elif arguments:
            pairs_text = "&".join(self.argument(argument, unresolved) for argument in arguments)
            if method in _BODYMETHODS and element.prop("HTTPSampler.use_multipart_for_http_post").lower() != "true":
                body = pairs_text
                if not any(name.lower() == "content-type" for name in headers):
                    headers["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                path += ("&" if "?" in path else "?") + pairs_text
        if element.prop("HTTPSampler.image_parser").lower() == "true":
            differences.append(_EMBEDDED)
        if any(f.prop("File.path") for f in element.collection("HTTPFileArgs.files")):
            differences.append("its file upload is not sent (Horde's body is text)")
        step: dict[str, Any] = {"name": scenario.unique(element.name), "method": method, "path": path}
        if headers:
            step["headers"] = {name: value for name, value in headers.items()}
        step["path"], in_query = self.credentials.query(step["path"])
        if body is not None:
            step["body"], in_body = self.credentials.body(body)
            in_query += in_body
        self.credential(None)
        if in_query:
            differences.append(f"{', '.join(in_query)}: a credential, a parameter given with -p (never written)")
        if own.extract:
            step["extract"] = own.extract
        if own.checks:
            step["checks"] = own.checks
        for limit in own.max_ms:
            self.thresholds.append({"condition": f"max < {limit:g}ms", "step": step["name"], "scenario": scenario.name})
        sent = str([step["path"], step.get("body"), step.get("headers")])
        unresolved = sorted({text for text in unresolved if text in sent})  # a credential's became a parameter
        if unresolved:
            differences.append(f"{', '.join(unresolved)}: nothing in the plan sets it, sent as written")
        steps: list[dict[str, Any]] = [{"type": "think", "think_time": pause} for pause in own.pauses]
        steps.append(step)
        self.report(label, element, f"the step '{step['name']}' ({method} {step['path']})", differences, step)
        return steps

    def argument(self, argument: Node, unresolved: list[str]) -> str:
        name = argument.prop("Argument.name")
        value = argument.prop("Argument.value")
        encode = argument.prop("HTTPArgument.always_encode").lower() == "true"
        text = self.names.url_template(value, unresolved, every=encode)
        name = self.names.url_template(name, unresolved, every=True)
        if argument.prop("HTTPArgument.use_equals", "true").lower() == "false" and not value:
            return name
        return f"{name}={text}"


_EMBEDDED = (
    "JMeter also fetched the page's embedded resources (images, scripts, styles); the plan sends the page "
    "alone (a parallel step can fetch them)"
)

#: A quoted literal after a name in code (``password = "x"``, ``vars.put("token", "x")``,
#: ``"apiKey": "x"``): the name, then the literal.
_ASSIGNED = re.compile(r"""([A-Za-z_][\w-]*)["']?\s*(?:=|:|,)\s*(["'])([^"'\n]+)\2""")


def _masked(line: str) -> str:
    """A line of a script as its finding quotes it: a literal given to a name the plan layer
    calls a credential's is masked, so that the quote (written to the plan) holds no secret."""
    return _ASSIGNED.sub(
        lambda m: m.group(0).replace(m.group(3), "***") if is_secret_header(m.group(1)) else m.group(0), line
    )


def _is_script(element: Node) -> bool:
    kind = element.kind
    return kind.startswith(("JSR223", "BeanShell", "BSF")) or kind in ("JavaScriptSampler",)


def _is_listener(element: Node) -> bool:
    kind = element.kind
    gui = element.attrs.get("guiclass", "")
    return (
        kind.endswith(("ResultCollector", "Listener", "Summariser"))
        or kind in ("BackendListener", "Summariser", "ResultSaver", "SimpleDataWriter")
        or "Visualizer" in gui
        or "vizualizers" in gui
    )
