"""A run's verdicts as JUnit XML, the report format CI servers (Jenkins, GitLab, GitHub
Actions' test reporters) read: one test case per threshold, and one for autostop when it fired.

>>> from horde.control.thresholds import Verdict
>>> passed = Verdict("p95 < 200ms", "login", None, "step login", 182.3, "ms", "< 200 ms", True,
...                  "p95 < 200ms [step login] passed: 182.3 ms")
>>> print(junit_xml([passed], None, run_id="r1", plan_name="shop"), end="")
<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="horde" tests="1" failures="0" errors="0">
  <testsuite name="horde: shop" tests="1" failures="0" errors="0" skipped="0">
    <properties>
      <property name="run_id" value="r1" />
    </properties>
    <testcase classname="horde.thresholds" name="p95 &lt; 200ms [step login]" time="0">
      <system-out>p95 &lt; 200ms [step login] passed: 182.3 ms</system-out>
    </testcase>
  </testsuite>
</testsuites>
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path

from horde.control.autostop import Firing
from horde.control.measure import format_value
from horde.control.thresholds import Verdict

# XML 1.0 cannot hold most control characters even escaped; a step name or message carrying
# one (pasted from a terminal) would make the whole report unreadable to the CI server.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)


def junit_xml(verdicts: Sequence[Verdict], firing: Firing | None, *, run_id: str, plan_name: str) -> str:
    """The JUnit XML document (UTF-8 declared) of a run's threshold verdicts and autostop firing."""
    cases: list[ElementTree.Element] = []
    for verdict in verdicts:
        case = ElementTree.Element("testcase", classname="horde.thresholds", name=_text(verdict.name), time="0")
        if verdict.passed:
            ElementTree.SubElement(case, "system-out").text = _text(verdict.message)
        else:
            failure = ElementTree.SubElement(case, "failure", message=_text(verdict.message), type="threshold")
            measured = "no data" if verdict.measured is None else format_value(verdict.measured, verdict.unit)
            failure.text = _text(f"scope: {verdict.scope}\nmeasured: {measured}\nlimit: {verdict.limit}\n")
        cases.append(case)
    if firing is not None:
        rule = firing.rule
        scope = [f"step {rule.step}"] if rule.step else []
        scope += [f"scenario {rule.scenario}"] if rule.scenario else []
        name = f"{rule.when} over {rule.window_s} s" + (f" [{', '.join(scope)}]" if scope else "")
        case = ElementTree.Element("testcase", classname="horde.autostop", name=_text(name), time="0")
        failure = ElementTree.SubElement(case, "failure", message=_text(firing.message), type="autostop")
        failure.text = _text(
            f"reason: {firing.reason}\nmeasured: {format_value(firing.measured, firing.unit)}\nat: second {firing.second} "
            f"({firing.elapsed_s:.1f} s into the run)\nexit code: {int(firing.exit_code)}\n"
        )
        cases.append(case)

    failures = str(sum(1 for case in cases if case.find("failure") is not None))
    root = ElementTree.Element("testsuites", name="horde", tests=str(len(cases)), failures=failures, errors="0")
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        name=_text(f"horde: {plan_name}"),
        tests=str(len(cases)),
        failures=failures,
        errors="0",
        skipped="0",
    )
    properties = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(properties, "property", name="run_id", value=_text(run_id))
    suite.extend(cases)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: str | Path, verdicts: Sequence[Verdict], firing: Firing | None, *, run_id: str, plan_name: str
) -> None:
    """Writes :func:`junit_xml` to ``path`` (UTF-8), creating its folder if need be."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(junit_xml(verdicts, firing, run_id=run_id, plan_name=plan_name), encoding="utf-8")
