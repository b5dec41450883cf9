"""JMeter test plans (.jmx) converted to Horde plans (horde.conversion.jmeter).

The fixtures in tests/fixtures/import/jmeter/ are the project's own, written in the shapes real
plans have (JMeter's templates and component reference, the jmeter-plugins thread groups, the
game team's plan from its field report). Each converts to a plan the plan layer accepts; every
element of a known kind has a finding (checked by a walk of the XML that does not use the
converter's parser); the answers (stages, weights, templates) are worked out by hand here; the
converted plans run against a recording target and the built-in game, and what arrives is what
the source asked for.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import pytest
from horde.conversion import Conversion, Outcome, jmeter_xml
from horde.conversion.jmeter import convert_jmx
from horde.engine.snapshot import StepSnapshot
from horde.errors import InvalidInput
from horde.plan.loader import check_plan_data
from horde.plan.parameters import apply_parameters
from horde.plan.problems import plan_from_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_target import RecordingTarget, recording_target  # noqa: F401 - the fixture

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "jmeter"
PLANS = ["game", "ultimate", "concurrency", "arrivals", "free_form_arrivals", "controllers", "scripts"]


def convert(name: str) -> Conversion:
    return convert_jmx(FIXTURES / f"{name}.jmx")


def validated(conversion: Conversion, **params: object) -> Any:
    """The plan as `horde run` reads it: parameters substituted, then the plan layer's (and
    engine's) rules, feeder files included."""
    return check_plan_data(apply_parameters(conversion.plan, params), folder=FIXTURES)


def finding(conversion: Conversion, element: str) -> Any:
    matches = [f for f in conversion.findings if f.element == element]
    assert len(matches) == 1, (element, [f.element for f in conversion.findings])
    return matches[0]


# --- every fixture converts, validates, and nothing is dropped silently ---------------------------


@pytest.mark.parametrize("name", PLANS)
def test_each_fixture_converts_to_a_plan_the_plan_layer_accepts(name: str) -> None:
    conversion = convert(name)
    assert conversion.source_format == "jmeter"
    validated(conversion)
    plan_from_dict(apply_parameters(conversion.plan).data)


def _test_elements(path: Path) -> list[tuple[str, str, str]]:
    """(file, kind, name) of every test element: a child of a hashTree with a testclass, read by
    ElementTree (not the converter's parser)."""
    found = []
    for tree in ElementTree.parse(path).iter("hashTree"):
        for child in tree:
            if child.tag != "hashTree" and child.get("testclass"):
                kind = child.get("testclass", "").rsplit(".", 1)[-1]
                found.append((path.name, kind, child.get("testname") or kind))
    return found


@pytest.mark.parametrize("name", PLANS)
def test_every_element_of_the_source_has_a_finding_at_its_line(name: str) -> None:
    conversion = convert(name)
    files = {FIXTURES / f"{name}.jmx"} | {
        FIXTURES / f.location.rsplit(":", 1)[0].rsplit("/", 1)[-1] for f in conversion.findings
    }
    expected = Counter(element for path in files for element in _test_elements(path))
    reported = Counter(
        (f.location.rsplit(":", 1)[0].rsplit("/", 1)[-1], *f.element.split(" ", 1))
        for f in conversion.findings
        if " '" in f.element
    )
    reported_names = {(file, kind, name.strip("'")) for (file, kind, name) in reported}
    missing = [element for element in expected if element not in reported_names]
    assert not missing, f"elements without a finding: {missing}"
    # Each location is the line of that element's start tag in its file.
    for f in conversion.findings:
        file, line = f.location.rsplit(":", 1)
        text = Path(file).read_text().splitlines()[int(line) - 1]
        kind = f.element.split(" ", 1)[0]
        assert "<" in text and (kind in text or "User Defined Variable" in f.element or kind == "target"), (f, text)


def test_findings_name_where_the_plan_holds_each_part() -> None:
    conversion = convert("game")
    plan = conversion.plan
    for f in conversion.findings:
        node: Any = plan
        for key in f.plan_path:
            node = node[key]
    register = finding(conversion, "HTTPSamplerProxy 'register'")
    assert register.plan_path == ("scenarios", 0, "setup", 0)
    city = finding(conversion, "HTTPSamplerProxy 'city'")
    assert plan["scenarios"][0]["steps"][0]["branches"][0]["steps"][1]["name"] == "city"
    assert city.plan_path == ("scenarios", 0, "steps", 0, "branches", 0, "steps", 1)


# --- the game team's plan -------------------------------------------------------------------------


def test_the_game_plan_keeps_its_knobs_setup_mix_and_steering() -> None:
    conversion = convert("game")
    plan = conversion.plan
    assert plan["parameters"] == {
        "THREAD_COUNT_TOTAL": 20,
        "RAMPUP": 5,
        "DURATION": 60,
        "TARGET_RESPONSE_TIME": 50,
        "API_VERSION": "v2",
        "host": "127.0.0.1",
        "port": "8080",
    }
    assert plan["target"]["base_url"] == "http://{{ params.host }}:{{ params.port }}"
    assert plan["target"]["headers"] == {"Accept": "application/json", "X-Api-Version": "{{ params.API_VERSION }}"}
    players = plan["scenarios"][0]
    assert [step["name"] for step in players["setup"]] == ["register", "login"]
    assert players["setup"][1]["extract"] == [
        {"var": "token", "from": "json", "expression": "$.token", "default": "NOT_FOUND"}
    ]
    assert players["feeders"] == [{"name": "players", "path": "players.csv", "format": "csv", "mode": "circular"}]
    assert '"login": "{{ players.login }}"' in players["setup"][0]["body"]
    assert [step["branches"][0]["weight"] for step in players["steps"]] == [40, 25, 25, 10]
    assert [step["branches"][1]["steps"] for step in players["steps"]] == [[], [], [], []]
    assert players["workload"]["stages"] == [
        {"duration_s": "{{ params.RAMPUP }}", "vus": "{{ params.THREAD_COUNT_TOTAL }}"},
        {"duration_s": "{{ params.DURATION }}", "vus": "{{ params.THREAD_COUNT_TOTAL }}"},
    ]
    assert plan["steer"]["type"] == "target_response_time"
    assert plan["steer"]["by"] == "pace" and plan["steer"]["scenarios"] == ["players"]
    assert validated(conversion, TARGET_RESPONSE_TIME=80).steer.target_ms == 80
    timer = finding(conversion, "JSR223Timer 'hold TARGET_RESPONSE_TIME'")
    assert timer.outcome is Outcome.APPROXIMATED
    assert "// slow down while the mean response time is over the target" in timer.note and "steer" in timer.note
    assert finding(conversion, "BackendListener 'influx'").note.startswith("not needed: Horde stores every run")
    assert finding(conversion, "ResultCollector 'Summary Report'").note.startswith("disabled in JMeter")
    assert plan["thresholds"] == [{"condition": "max < 500ms", "step": "collect", "scenario": "players"}]


def test_a_property_given_on_the_command_line_reaches_the_stages() -> None:
    plan = validated(convert("game"), THREAD_COUNT_TOTAL=300, RAMPUP=30, DURATION=600)
    stages = plan.scenarios[0].workload.stages
    assert [(s.duration_s, s.vus) for s in stages] == [(30, 300), (600, 300)]


# --- the plugins' thread groups, worked out by hand -----------------------------------------------


def test_ultimate_thread_group_rows_sum_into_stages_at_their_corners() -> None:
    # Row 1: 10 threads from 0 s over 30 s, held 60 s, down over 10 s (gone at 100 s).
    # Row 2: 20 threads from 30 s over 10 s, held 30 s, down over 30 s (gone at 100 s).
    # At 30 s: 10; at 40 s: 30; at 70 s: 30; at 90 s: 10 + 20 * 10/30 = 16.7; at 100 s: 0.
    workload = convert("ultimate").plan["scenarios"][0]["workload"]
    assert workload["type"] == "closed" and workload["start_vus"] == 0
    assert [(s["duration_s"], s["vus"]) for s in workload["stages"]] == [
        (30, 10),
        (10, 30),
        (30, 30),
        (20, 17),
        (10, 0),
    ]


def test_concurrency_thread_group_steps_in_minutes() -> None:
    # 40 users in 4 steps over 2 minutes: 10, 20, 30, 40 every 30 s, then held 5 minutes.
    stages = convert("concurrency").plan["scenarios"][0]["workload"]["stages"]
    levels = [(round(sum(s["duration_s"] for s in stages[: i + 1]), 3), s["vus"]) for i, s in enumerate(stages)]
    assert levels == [(0.1, 10), (30, 10), (30.1, 20), (60, 20), (60.1, 30), (90, 30), (90.1, 40), (120, 40), (420, 40)]


def test_arrivals_thread_groups_are_open_workloads() -> None:
    arrivals = convert("arrivals").plan["scenarios"][0]["workload"]
    assert arrivals == {
        "type": "open",
        "start_rate_per_s": 0,
        "stages": [{"duration_s": 60, "rate_per_s": 600}, {"duration_s": 120, "rate_per_s": 600}],
        "max_vus": 200,
    }
    # Rows per minute: 60 → 600 over 1 min, 600 held 2 min, a jump to 1200 then down to 0 over 1 min.
    free = convert("free_form_arrivals").plan["scenarios"][0]["workload"]
    assert free["type"] == "open" and free["start_rate_per_s"] == 1
    assert [(s["duration_s"], s["rate_per_s"]) for s in free["stages"]] == [(60, 10), (120, 10), (0.1, 20), (60, 0)]
    assert free["max_vus"] == 200  # no limit given: ten seconds of the peak's arrivals, as its finding says
    assert (
        "no concurrency limit" in finding(convert("free_form_arrivals"), "FreeFormArrivalsThreadGroup 'free form'").note
    )


# --- controllers ----------------------------------------------------------------------------------


def test_every_controller_becomes_its_control_flow() -> None:
    conversion = convert("controllers")
    scenario = conversion.plan["scenarios"][0]
    steps = scenario["steps"]
    assert [step["name"] for step in scenario["setup"]] == ["signin"]
    assert conversion.plan["target"]["connect_timeout_ms"] == 2000
    assert conversion.plan["target"]["request_timeout_ms"] == 15000
    assert "the whole exchange in Horde" in finding(conversion, "ConfigTestElement 'HTTP Request Defaults'").note
    assert steps[0] == {
        "type": "if",
        "condition": "iteration < 3",
        "then": [{"name": "welcome", "method": "GET", "path": "/welcome"}],
    }
    assert [b["steps"][0]["name"] for b in steps[1]["branches"]] == ["red", "green", "blue"]
    assert {b["weight"] for b in steps[1]["branches"]} == {1}
    assert finding(conversion, "InterleaveControl 'in turn'").outcome is Outcome.APPROXIMATED
    assert steps[3]["branches"][0]["weight"] == 30 and steps[3]["branches"][0]["steps"][0]["name"] == "checkout"
    assert steps[4]["type"] == "loop" and steps[4]["count"] == "{{ params.PAGES }}"
    assert steps[4]["steps"][0]["path"] == "/page?n={{ random_int(1, 9) }}"
    assert steps[5]["while"] == 'next != "done" and next != ""'
    assert steps[6]["condition"] == 'next == "more"'
    assert steps[8] == {
        "type": "loop",
        "for_each": "item",
        "as": "current",
        "steps": [{"name": "item", "method": "GET", "path": "/items/{{ current }}"}],
    }
    assert steps[9]["type"] == "group" and steps[9]["name"] == "profile"  # the Module Controller's target
    assert steps[10]["path"] == "/search?q=red%20shoes"  # from the included file
    script_if = finding(conversion, "IfController 'script condition'")
    assert script_if.outcome is Outcome.NOT_CONVERTED and "__groovy(vars.get(\"next\").startsWith" in script_if.note
    assert finding(conversion, "HTTPSamplerProxy 'scripted'").outcome is Outcome.NOT_CONVERTED
    assert "loop, refused" in finding(conversion, "IncludeController 'again'").note
    assert finding(conversion, "SwitchController 'by language'").outcome is Outcome.NOT_CONVERTED
    assert "no Module or Include Controller refers to" in finding(conversion, "HTTPSamplerProxy 'orphan'").note
    assert finding(conversion, "UniformRandomTimer 'reading'").note.startswith("disabled in JMeter")


# --- scripts and timers ---------------------------------------------------------------------------


def test_scripts_are_quoted_not_run_and_say_what_the_plan_does_instead() -> None:
    conversion = convert("scripts")
    for element, first_line, instead in [
        ("JSR223PreProcessor 'define helpers'", "def sum(Integer x, Integer y) {", "sends the next request without"),
        ("JSR223Sampler 'sign payload'", "import javax.crypto.Mac", "sends nothing in its place"),
        ("BeanShellPreProcessor 'timestamp'", 'vars.put("ts"', "sends the next request without"),
        ("JSR223PostProcessor 'parse reply'", "var reply = JSON.parse", "reads nothing from the response"),
        ("JSR223Assertion 'ack set'", 'if (!vars.get("ack"))', "judges the response by its checks"),
        ("BeanShellSampler 'legacy'", 'log.info("legacy hook")', "sends nothing"),
        ("BSFTimer 'old timer'", "Math.floor(Math.random() * 100)", "does not pause for it"),
    ]:
        f = finding(conversion, element)
        assert f.outcome is Outcome.NOT_CONVERTED and first_line in f.note and instead in f.note, f
    parse_reply = finding(conversion, "JSR223PostProcessor 'parse reply'").note
    assert "line 6" in parse_reply and "line 7" not in parse_reply  # the first six lines, no more
    lookahead = finding(conversion, "RegexExtractor 'look-ahead'")
    assert lookahead.outcome is Outcome.NOT_CONVERTED and "look-around" in lookahead.note
    assert finding(conversion, "JDBCSampler 'count rows'").outcome is Outcome.NOT_CONVERTED
    devices, payments = conversion.plan["scenarios"]
    # 30 samples a minute for each thread, one request an iteration: an iteration every 2 s.
    assert devices["pacing_s"] == 2
    assert devices["steps"][0] == {"type": "think", "think_time": {"type": "normal", "mean_ms": 300, "stddev_ms": 100}}
    # sig (what the script signed) is named like a credential: a parameter the user gives.
    assert devices["steps"][1]["body"] == "device={{ vu }}&sig={{ params.sig }}"
    assert devices["steps"][1]["extract"][0]["expression"] == "<state(?:\\s[^>]*)?>([^<]*)</state>"
    # 6000 samples an hour over the thread group: 1.67 iterations a second, open.
    assert payments["workload"]["type"] == "open" and payments["workload"]["stages"][0]["rate_per_s"] == pytest.approx(
        6000 / 3600, abs=1e-6
    )
    assert "payments.example" in finding(conversion, "HTTPSamplerProxy 'pay'").note


# --- bad input ------------------------------------------------------------------------------------


def _refused(tmp_path: Path, text: str | bytes) -> InvalidInput:
    path = tmp_path / "bad.jmx"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InvalidInput) as caught:
        convert_jmx(path)
    assert caught.value.hint
    return caught.value


def test_bad_xml_is_located_with_a_hint(tmp_path: Path) -> None:
    error = _refused(tmp_path, '<?xml version="1.0"?>\n<jmeterTestPlan>\n  <hashTree>\n  </hashTre>\n')
    assert re.match(r".*bad\.jmx:4: not well-formed XML", error.message)


def test_entities_are_refused_before_they_expand(tmp_path: Path) -> None:
    laughs = (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>\n'
        "<jmeterTestPlan>&lol2;</jmeterTestPlan>\n"
    )
    assert "document type" in _refused(tmp_path, laughs).message
    external = '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<x>&e;</x>\n'
    assert "bad.jmx:2" in _refused(tmp_path, external).message


def test_other_files_are_not_jmeter_plans(tmp_path: Path) -> None:
    assert "not a JMeter test plan" in _refused(tmp_path, "<html><body/></html>").message
    assert "not well-formed XML" in _refused(tmp_path, "").message
    error = _refused(
        tmp_path, '<jmeterTestPlan><hashTree><ThreadGroup testclass="ThreadGroup"/></hashTree></jmeterTestPlan>'
    )
    assert "not a TestPlan" in error.message


@pytest.mark.parametrize("encoding", ["TF-8", "shift_jis", "utf-32", "idna", "punycode", "undefined", "rot13"])
def test_an_encoding_expat_cannot_read_is_invalid_input(tmp_path: Path, encoding: str) -> None:
    text = f'<?xml version="1.0" encoding="{encoding}"?>\n<jmeterTestPlan><hashTree/></jmeterTestPlan>\n'
    assert "bad.jmx:1:" in _refused(tmp_path, text).message


def test_size_and_depth_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "<jmeterTestPlan>" + "<a>" * 300 + "</a>" * 300 + "</jmeterTestPlan>"
    assert "deeper than 200" in _refused(tmp_path, deep).message
    monkeypatch.setattr(jmeter_xml, "MAX_BYTES", 1000)
    assert "larger than the 1,000" in _refused(tmp_path, "<jmeterTestPlan>" + " " * 2000 + "</jmeterTestPlan>").message


def test_a_missing_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read the test plan"):
        convert_jmx(tmp_path / "nowhere.jmx")


_GAME = (FIXTURES / "game.jmx").read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_random_bytes_raise_nothing_but_invalid_input(data: bytes) -> None:
    try:
        jmeter_xml.parse_jmx(data, "fuzz.jmx")
    except InvalidInput:
        pass


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, len(_GAME) - 1), st.integers(1, 400), st.binary(max_size=20))
def test_a_damaged_plan_is_invalid_input_or_a_plan_that_validates(
    tmp_path: Path, at: int, cut: int, insert: bytes
) -> None:
    path = tmp_path / "game.jmx"
    path.write_bytes(_GAME[:at] + insert + _GAME[at + cut :])
    (tmp_path / "players.csv").write_bytes((FIXTURES / "players.csv").read_bytes())
    try:
        conversion = convert_jmx(path)
    except InvalidInput:
        return
    check_plan_data(apply_parameters(conversion.plan), folder=tmp_path)


# --- round trips ----------------------------------------------------------------------------------


def _run(plan_document: dict[str, Any], **params: object) -> list[StepSnapshot]:
    """Runs a converted plan in the engine; the steps' counts of every interval."""
    from horde.engine.run import Run

    data = copy.deepcopy(plan_document)
    for scenario in data["scenarios"]:
        for feeder in scenario.get("feeders", []):
            feeder["path"] = str(FIXTURES / feeder["path"])
    plan = plan_from_dict(apply_parameters(data, params).data)
    steps: list[StepSnapshot] = []
    with Run.start(plan, workers=1) as run:
        for snapshot in run:
            steps.extend(snapshot["steps"])
    return steps


def test_the_game_plan_sends_the_requests_the_jmeter_plan_describes(recording_target: RecordingTarget) -> None:  # noqa: F811
    recording_target.answer("/game/register", "{}", status=201)  # the register step checks 201 or 409
    recording_target.answer("/game/login", '{"token": "tok-7"}')
    recording_target.answer("/game/buildings", '{"buildings": [{"kind": "farm"}, {"kind": "mill"}]}')
    port = recording_target.base_url.rsplit(":", 1)[1]
    _run(convert("game").plan, host="127.0.0.1", port=port, THREAD_COUNT_TOTAL=4, RAMPUP=1, DURATION=2)
    received = recording_target.requests()
    by_path = {r.path: r for r in received}
    assert {"/game/register", "/game/login"} <= set(by_path)
    assert {r.method for r in received if r.path == "/game/register"} == {"POST"}
    register = by_path["/game/register"]
    assert register.headers["content-type"] == "application/json"
    assert re.fullmatch(rb'\{"login": "player-\d", "password": "secret-\d"\}', register.body)
    behaviour = [r for r in received if r.path not in ("/game/register", "/game/login")]
    assert behaviour, "no behaviour request arrived"
    methods = {
        "/game/city": "GET",
        "/game/buildings": "GET",
        "/game/construct": "POST",
        "/game/collect": "POST",
        "/game/resources": "GET",
    }
    for request in behaviour:
        assert request.method == methods[request.path], request
        assert request.headers["authorization"] == "Bearer tok-7"
        assert request.headers["accept"] == "application/json" and request.headers["x-api-version"] == "v2"
        if request.path == "/game/buildings":
            assert request.query == (("filter", "can build"),)
        if request.path == "/game/construct":
            assert request.body in (b'{"kind": "farm"}', b'{"kind": "mill"}')


def test_the_throughput_controllers_mix_is_kept_within_one_point(builtin_target: Any) -> None:
    """The game's four Throughput Controllers (40, 25, 25 and 10 %) against the built-in game: the
    shares of the requests they send. The pauses are the JMeter timers'; they are taken out so
    that the run counts enough passes in seconds."""
    plan = copy.deepcopy(convert("game").plan)
    plan.pop("steer")

    def without_pauses(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = []
        for step in steps:
            if step.get("type") == "think":
                continue
            for key in ("steps", "then"):
                if key in step:
                    step[key] = without_pauses(step[key])
            for branch in step.get("branches", []):
                branch["steps"] = without_pauses(branch["steps"])
            kept.append(step)
        return kept

    players = plan["scenarios"][0]
    players["steps"] = without_pauses(players["steps"])
    steps = _run(plan, host="127.0.0.1", port=str(builtin_target.port), THREAD_COUNT_TOTAL=8, RAMPUP=0.5, DURATION=3)
    counts: Counter[str] = Counter()
    for entry in steps:
        counts[entry["step"]] += entry["requests"]
    actions = {
        "city": counts["city"],
        "build": counts["buildings"],
        "collect": counts["collect"],
        "resources": counts["resources"],
    }
    total = sum(actions.values())
    assert total >= 40_000, f"too few requests to judge a mix within 1 point: {actions}"
    shares = {name: 100 * count / total for name, count in actions.items()}
    print(f"mix over {total} requests: {actions}; shares {shares}")
    for name, weight in {"city": 40, "build": 25, "collect": 25, "resources": 10}.items():
        assert abs(shares[name] - weight) < 1, shares


def _game_variant(tmp_path: Path, old: str, new: str, *, csv: str | None = "players.csv") -> Conversion:
    text = (FIXTURES / "game.jmx").read_text()
    assert old in text
    (tmp_path / "game.jmx").write_text(text.replace(old, new))
    if csv is not None:
        (tmp_path / csv).write_bytes((FIXTURES / "players.csv").read_bytes())
    conversion = convert_jmx(tmp_path / "game.jmx")
    check_plan_data(apply_parameters(conversion.plan), folder=tmp_path)
    return conversion


def test_a_csv_file_the_plan_cannot_read_is_no_feeder_and_says_why(tmp_path: Path) -> None:
    conversion = _game_variant(tmp_path, "players.csv", "elsewhere.csv", csv=None)
    data_set = finding(conversion, "CSVDataSet 'players'")
    assert data_set.outcome is Outcome.NOT_CONVERTED and "elsewhere.csv beside the plan" in data_set.note
    register = conversion.plan["scenarios"][0]["setup"][0]
    assert "feeders" not in conversion.plan["scenarios"][0] and "${login}" in register["body"]
    assert "${login}" in finding(conversion, "HTTPSamplerProxy 'register'").note


def test_columns_jmeter_names_must_head_the_file(tmp_path: Path) -> None:
    conversion = _game_variant(
        tmp_path, '<boolProp name="ignoreFirstLine">true', '<boolProp name="ignoreFirstLine">false'
    )
    assert "put the line 'login,password' at the top of players.csv" in finding(conversion, "CSVDataSet 'players'").note


def test_a_unique_feeder_shorter_than_the_vus_cycles(tmp_path: Path) -> None:
    # 4 lines, 20 VUs: 'unique' would refuse the run; the plan cycles and says so.
    conversion = _game_variant(tmp_path, '<boolProp name="recycle">true', '<boolProp name="recycle">false')
    assert conversion.plan["scenarios"][0]["feeders"][0]["mode"] == "circular"
    note = finding(conversion, "CSVDataSet 'players'")
    assert note.outcome is Outcome.APPROXIMATED and "4 lines for 20 VUs" in note.note


def test_credentials_the_jmeter_plan_holds_are_parameters_never_written() -> None:
    conversion = convert("scripts")
    written = json.dumps(conversion.plan)
    assert 'def secret = "***"' in finding(conversion, "JSR223Sampler 'sign payload'").note
    for secret in ("k-5550123", "ZGV2aWNlOmh1bnRlcjIy", "tok-777", "mac-k3y-0042"):
        assert secret not in written
        assert all(secret not in f.note for f in conversion.findings)
    report = conversion.plan["scenarios"][0]["steps"][1]
    assert report["headers"]["Authorization"] == "Basic {{ params.authorization }}"
    assert report["headers"]["X-Api-Key"] == "{{ params.API_KEY }}"
    assert report["path"] == "/report?access_token={{ params.access_token }}&v=2"
    parameters = conversion.plan["parameters"]
    assert parameters["API_KEY"] == parameters["authorization"] == parameters["access_token"] == ""
    assert "a credential" in finding(conversion, "User Defined Variable 'API_KEY'").note
    plan = validated(conversion, API_KEY="k-1", authorization="x", access_token="t", sig="s")
    assert plan.scenarios[0].steps[1].headers["X-Api-Key"] == "k-1"


# Random JMeter trees: elements of the kinds the converter knows (and some it does not), with
# properties drawn from the values real plans hold, nested in any order.
_KINDS = [
    "ThreadGroup",
    "HTTPSamplerProxy",
    "ConfigTestElement",
    "HeaderManager",
    "CookieManager",
    "CSVDataSet",
    "RegexExtractor",
    "JSONPostProcessor",
    "BoundaryExtractor",
    "XPathExtractor",
    "ResponseAssertion",
    "JSONPathAssertion",
    "DurationAssertion",
    "ConstantTimer",
    "UniformRandomTimer",
    "GaussianRandomTimer",
    "ConstantThroughputTimer",
    "PreciseThroughputTimer",
    "ThroughputController",
    "RandomController",
    "InterleaveControl",
    "LoopController",
    "WhileController",
    "IfController",
    "ForeachController",
    "TransactionController",
    "GenericController",
    "OnceOnlyController",
    "ModuleController",
    "IncludeController",
    "TestFragmentController",
    "JSR223Timer",
    "JSR223PreProcessor",
    "ResultCollector",
    "SwitchController",
    "kg.apc.jmeter.threads.UltimateThreadGroup",
    "com.blazemeter.jmeter.threads.arrivals.ArrivalsThreadGroup",
]
_PROPS = [
    "ThreadGroup.num_threads",
    "ThreadGroup.ramp_time",
    "ThreadGroup.duration",
    "ThreadGroup.scheduler",
    "HTTPSampler.path",
    "HTTPSampler.method",
    "HTTPSampler.domain",
    "HTTPSampler.port",
    "HTTPSampler.postBodyRaw",
    "ThroughputController.style",
    "ThroughputController.percentThroughput",
    "ThroughputController.maxThroughput",
    "LoopController.loops",
    "WhileController.condition",
    "IfController.condition",
    "ConstantTimer.delay",
    "RandomTimer.range",
    "RegexExtractor.refname",
    "RegexExtractor.regex",
    "RegexExtractor.match_number",
    "JSONPostProcessor.referenceNames",
    "JSONPostProcessor.jsonPathExprs",
    "JSON_PATH",
    "EXPECTED_VALUE",
    "JSONVALIDATION",
    "Assertion.test_field",
    "Assertion.test_type",
    "DurationAssertion.duration",
    "throughput",
    "calcMode",
    "TargetLevel",
    "RampUp",
    "Hold",
    "Unit",
    "filename",
    "variableNames",
    "script",
    "ForeachController.inputVal",
    "ForeachController.returnVal",
    "IncludeController.includepath",
]
_VALUES = st.sampled_from(
    [
        "",
        "0",
        "1",
        "-1",
        "3",
        "50.5",
        "100",
        "true",
        "false",
        "GET",
        "POST",
        "TRACE",
        "/",
        "/a b",
        "/x?y=${v}",
        "${v}",
        "${__P(n,5)}",
        "${__jexl3(\"${v}\" == \"a\")}",
        "$.a",
        "(\\d+)",
        "(?=x)",
        "M",
        "S",
        "players.csv",
        "Assertion.response_code",
        "Assertion.response_data",
        "16",
        "8",
        "200",
        "v",
        "a{{b",
        "{",
    ]
)


def _elements(depth: int) -> st.SearchStrategy[str]:
    def element(kind: str, props: list[tuple[str, str]], children: list[str], enabled: bool) -> str:
        body = "".join(f'<stringProp name="{name}">{escape(value)}</stringProp>' for name, value in props)
        tree = "<hashTree>" + "".join(children) + "</hashTree>"
        return f'<{kind} testclass="{kind}" testname="{kind.rsplit(".", 1)[-1]}" enabled="{str(enabled).lower()}">{body}</{kind}>{tree}'

    children = st.lists(_elements(depth - 1), max_size=3) if depth > 0 else st.just([])
    return st.builds(
        element,
        st.sampled_from(_KINDS),
        st.lists(st.tuples(st.sampled_from(_PROPS), _VALUES), max_size=5),
        children,
        st.booleans(),
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(_elements(3), max_size=4))
def test_random_jmeter_trees_convert_to_a_valid_plan_or_invalid_input(tmp_path: Path, parts: list[str]) -> None:
    # Inside a thread group with one request, so that most trees give a plan to check.
    group = (
        '<ThreadGroup testclass="ThreadGroup" testname="g"><stringProp name="ThreadGroup.num_threads">2</stringProp>'
        '</ThreadGroup><hashTree><HTTPSamplerProxy testclass="HTTPSamplerProxy" testname="r"/><hashTree/>'
        + "".join(parts)
        + "</hashTree>"
    )
    plan = '<TestPlan testclass="TestPlan" testname="fuzz"/><hashTree>' + group + "".join(parts[:1]) + "</hashTree>"
    (tmp_path / "fuzz.jmx").write_text(f"<jmeterTestPlan><hashTree>{plan}</hashTree></jmeterTestPlan>")
    (tmp_path / "players.csv").write_bytes((FIXTURES / "players.csv").read_bytes())
    try:
        conversion = convert_jmx(tmp_path / "fuzz.jmx")
    except InvalidInput:
        return
    check_plan_data(apply_parameters(conversion.plan), folder=tmp_path)


def test_the_random_controller_and_a_throughput_percent_keep_their_mix(builtin_target: Any) -> None:
    """controllers.jmx's Random Controller (three requests, one a pass) and its 30 % Throughput
    Controller, run alone (the other controllers' requests would only slow the count) against the
    built-in target, which answers these paths 404: counted all the same."""
    plan = copy.deepcopy(convert("controllers").plan)
    scenario = plan["scenarios"][0]
    random_choice, checkout = scenario["steps"][1], scenario["steps"][3]
    assert [b["steps"][0]["name"] for b in random_choice["branches"]] == ["red", "green", "blue"]
    scenario.pop("setup")
    scenario["steps"] = [random_choice, checkout]
    scenario["workload"] = {"type": "closed", "start_vus": 8, "stages": [{"duration_s": 2, "vus": 8}]}
    counts: Counter[str] = Counter()
    for entry in _run(plan, host="127.0.0.1", port=str(builtin_target.port)):
        counts[entry["step"]] += entry["requests"]
    passes = counts["red"] + counts["green"] + counts["blue"]
    assert passes >= 20_000, f"too few passes to judge a mix within 1 point: {counts}"
    print(f"random controller over {passes} passes: {dict(counts)}")
    for color in ("red", "green", "blue"):
        assert abs(100 * counts[color] / passes - 100 / 3) < 1, counts
    assert abs(100 * counts["cart"] / passes - 30) < 1, counts


def test_the_controllers_plan_sends_what_its_controllers_say(recording_target: RecordingTarget) -> None:  # noqa: F811
    recording_target.answer("/page", '{"next": "more"}')
    recording_target.answer("/more", '{"next": "done"}')
    recording_target.answer("/catalog", '{"items": [{"id": "a1"}, {"id": "b2"}]}')
    plan = copy.deepcopy(convert("controllers").plan)
    plan["scenarios"][0]["workload"] = {"type": "closed", "start_vus": 2, "stages": [{"duration_s": 1, "vus": 2}]}
    port = recording_target.base_url.rsplit(":", 1)[1]
    _run(plan, host="127.0.0.1", port=port)
    received = recording_target.requests()
    methods = {(r.method, r.path) for r in received}
    expected = {
        ("POST", "/signin"),
        ("GET", "/welcome"),
        ("GET", "/cart"),
        ("POST", "/pay"),
        ("GET", "/page"),
        ("GET", "/more"),
        ("GET", "/catalog"),
        ("GET", "/items/a1"),
        ("GET", "/items/b2"),
        ("GET", "/profile"),
        ("PUT", "/settings"),
        ("GET", "/search"),
    }
    colors = {("GET", f"/color/{c}") for c in ("red", "green", "blue")}
    sides = {("GET", "/side/left"), ("GET", "/side/right")}
    assert expected <= methods and methods & colors and methods & sides, methods
    # Nothing the plan left out (a script's condition, a Switch Controller, an unreferenced
    # fragment) or whose condition never held (next is "done" after the While loop) was sent.
    assert methods <= expected | colors | sides, methods - expected - colors - sides
    assert sum(r.path == "/signin" for r in received) == 2  # once per VU: the Once Only Controller
    assert sum(r.path == "/welcome" for r in received) <= 2 * 3  # the first three passes of each VU
    passes = sum(r.path == "/catalog" for r in received)
    assert sum(r.path == "/page" for r in received) >= 3 * (passes - 2)  # three pages a pass (the last may be cut)
    assert {r.query for r in received if r.path == "/search"} == {(("q", "red shoes"),)}
    assert {int(dict(r.query)["n"]) for r in received if r.path == "/page"} <= set(range(1, 10))
