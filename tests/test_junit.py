"""The JUnit report parses back with the counts, names and messages of the verdicts and the
autostop firing, whatever text the plan's names hold."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

from horde.control.autostop import Firing
from horde.errors import ExitCode
from horde.cli.junit import junit_xml, write_junit
from horde.plan.control import AutostopRule
from horde.control.thresholds import Verdict

PASSED = Verdict(
    "p95 < 200ms",
    "login",
    None,
    "step login",
    182.3,
    "ms",
    "< 200 ms",
    True,
    "p95 < 200ms [step login] passed: 182.3 ms",
)
FAILED = Verdict(
    "errors < 1%", None, None, "all requests", 2.5, "%", "< 1 %", False, "errors < 1% failed: 2.5 %, not < 1 %"
)
NO_DATA = Verdict(
    "p99 < 1s",
    "checkout",
    "shop",
    "step checkout of scenario shop",
    None,
    "ms",
    "< 1,000 ms",
    False,
    "p99 < 1s [step checkout of scenario shop] failed: no requests in scope",
)
FIRING = Firing(
    rule=AutostopRule(when="p95 > 500ms", window_s=10, step="login"),
    reason="latency",
    measured=812.4,
    unit="ms",
    second=37,
    elapsed_s=37.0,
    exit_code=ExitCode.AUTOSTOP_LATENCY,
    message="autostop: p95 of step login over the last 10 s was 812.4 ms (> 500 ms) at 00:37",
)


def parse(document: str) -> ElementTree.Element:
    root = ElementTree.fromstring(document.encode("utf-8"))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert (root.get("tests"), root.get("failures")) == (suite.get("tests"), suite.get("failures"))
    return suite


def test_one_case_per_threshold_with_failures_counted() -> None:
    suite = parse(junit_xml([PASSED, FAILED, NO_DATA], None, run_id="r42", plan_name="shop"))
    assert suite.get("name") == "horde: shop"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = suite.findall("testcase")
    assert [(case.get("classname"), case.get("name")) for case in cases] == [
        ("horde.thresholds", "p95 < 200ms [step login]"),
        ("horde.thresholds", "errors < 1%"),
        ("horde.thresholds", "p99 < 1s [step checkout of scenario shop]"),
    ]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert (failure.get("type"), failure.get("message")) == ("threshold", "errors < 1% failed: 2.5 %, not < 1 %")
    assert "measured: 2.5 %" in (failure.text or "") and "limit: < 1 %" in (failure.text or "")
    no_data = cases[2].find("failure")
    assert no_data is not None and "measured: no data" in (no_data.text or "")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"run_id": "r42"}


def test_an_autostop_firing_is_a_failed_case() -> None:
    suite = parse(junit_xml([PASSED], FIRING, run_id="r", plan_name="shop"))
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    case = suite.findall("testcase")[-1]
    assert (case.get("classname"), case.get("name")) == ("horde.autostop", "p95 > 500ms over 10 s [step login]")
    failure = case.find("failure")
    assert failure is not None
    assert (failure.get("type"), failure.get("message")) == ("autostop", FIRING.message)
    assert "exit code: 10" in (failure.text or "") and "measured: 812.4 ms" in (failure.text or "")


def test_nothing_to_report_is_an_empty_valid_suite() -> None:
    suite = parse(junit_xml([], None, run_id="r", plan_name="plan"))
    assert (suite.get("tests"), suite.get("failures")) == ("0", "0")
    assert suite.findall("testcase") == []


def test_any_text_survives_the_round_trip() -> None:
    awkward = 'a<b>&"c\' \x01\x1b[31m é 😀'
    verdict = Verdict(
        "p95 < 200ms",
        awkward,
        None,
        f"step {awkward}",
        300.0,
        "ms",
        "< 200 ms",
        False,
        f"p95 < 200ms [step {awkward}] failed: 300 ms, not < 200 ms\nsecond line",
    )
    suite = parse(junit_xml([verdict], None, run_id="r&1", plan_name=awkward))
    # Characters XML cannot hold become U+FFFD; everything else comes back as written.
    readable = awkward.replace("\x01", "\ufffd").replace("\x1b", "\ufffd")
    assert suite.get("name") == f"horde: {readable}"
    case = suite.find("testcase")
    assert case is not None and case.get("name") == f"p95 < 200ms [step {readable}]"
    failure = case.find("failure")
    assert failure is not None and failure.get("message", "").endswith("not < 200 ms\nsecond line")


def test_write_junit_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "horde.xml"
    write_junit(path, [FAILED], FIRING, run_id="r", plan_name="shop")
    assert path.read_bytes().startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "2")
