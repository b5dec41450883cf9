"""`horde report`: one self-contained HTML file per run (or comparison of runs).

Checked without a browser here (tests/test_report_browser.py opens the pages in one): the
steps table carries `horde show --json`'s numbers to the digit, the figures are the stored
per-second data, nothing is fetched from the network, user text is escaped, and the optional
summary sections (thresholds, autostop, capacity) and the saturation warning appear when due.
A steered run's capacity answer is a capacity lab's: find-max's steps and knee; target response
time's sentence, readings and the chart of its level and percentile against T over the run's time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from horde.cli import app, main
from horde.cli.results import register
from horde.results.compare import compare_runs
from horde.errors import ExitCode
from horde.report import render_comparison_report, render_run_report
from horde.report.capacity_view import capacity_facts
from horde.results.stored_run import ALL_REQUESTS, load_run
from report_pages import unpacked
from horde.store import Store
from recorded_runs import get, plan_dict, record_run

register(app)

#: A step name that tries to break out of the table and of the figures' <script>.
HOSTILE = 'x</script><b>"y"&'
STEP_FIELDS = ("requests", "errors", "error_percent", "rps")
LATENCY_FIELDS = ("p50", "p90", "p95", "p99", "max")


def page_figures(html: str) -> dict[str, Any]:
    """The figures a report (or its DOM once drawn) carries: plotly figure dicts by element id."""
    figures: dict[str, Any] = json.loads(unpacked(html, "figures"))
    return figures


class ReportPage(HTMLParser):
    """What the tests read from a report: table rows by step, sources fetched, the figures."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, dict[str, str]]] = {}
        self.fetched: list[str] = []
        self.scripts: list[str] = []
        self.text_outside_scripts: list[str] = []
        self._table: str | None = None
        self._row: dict[str, str] | None = None
        self._field: str | None = None
        self._in_script = False
        self.feed(html)
        self.figures = page_figures(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        for name in ("src", "href"):
            if attributes.get(name):
                self.fetched.append(f"{tag} {name}={attributes[name]}")
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag == "table" and attributes.get("id"):
            self._table = attributes["id"]
            self.tables[self._table or ""] = {}
        if tag == "tr" and self._table and attributes.get("data-step") is not None:
            self._row = {}
            self.tables[self._table][attributes["data-step"] or ""] = self._row
        if tag == "td" and self._row is not None and attributes.get("data-field"):
            self._field = attributes["data-field"]
            self._row[self._field or ""] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False
        if tag == "td":
            self._field = None
        if tag == "tr":
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
            return
        self.text_outside_scripts.append(data)
        if self._row is not None and self._field:
            self._row[self._field] += data


@pytest.fixture(scope="module")
def stored(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(store URL, run id) of a 2 s run: a fast step, a step with a hostile name, and a group
    around a step that always fails with 503."""
    store_url = f"sqlite:///{tmp_path_factory.mktemp('report') / 'runs.sqlite'}"
    plan = plan_dict(
        builtin_target.port,
        [
            get("fast", "/"),
            get(HOSTILE, "/delay/2"),
            {"type": "group", "name": "g", "steps": [get("fail", "/status/503")]},
        ],
        vus=2,
        duration_s=2.0,
    )
    yield store_url, record_run(store_url, plan, tags={"build": "<42>"})


def cli(store_url: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*args, "--store", store_url])
    out, err = capsys.readouterr()
    return code, out, err


def copy_run(
    store_url: str,
    run_id: str,
    *,
    summary_extra: dict[str, Any] | None = None,
    snapshot_changes: dict[str, Any] | None = None,
) -> str:
    """A copy of a stored run (its snapshots, optionally changed), with a stored summary that
    has ``summary_extra`` added: what the run's threshold and autostop checks would store."""
    with Store.open(store_url) as store:
        source = load_run(store, run_id)
        copy_id = store.create_run(
            plan=source.record.plan, plan_name="copy", parameters=source.record.parameters, tags={}
        )
        for snapshot in source.snapshots:
            store.add_snapshot(copy_id, {**snapshot, **(snapshot_changes or {})})
        store.finish_run(
            copy_id, status="finished", summary={**source.summary, "run_id": copy_id, **(summary_extra or {})}
        )
    return copy_id


def test_steps_table_has_exactly_the_numbers_of_horde_show(
    stored: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store_url, run_id = stored
    output = tmp_path / "out" / "report.html"
    code, out, err = cli(store_url, capsys, "report", run_id[:15], "-o", str(output))
    assert code == ExitCode.OK, err
    assert str(output) in out
    code, out, err = cli(store_url, capsys, "show", run_id, "--json")
    assert code == ExitCode.OK, err
    summary = json.loads(out)
    with Store.open(store_url) as store:
        assert load_run(store, run_id).summary == summary  # the report's source is show's summary
    rows = ReportPage(output.read_text(encoding="utf-8")).tables["steps"]
    assert list(rows) == [*summary["steps"], ALL_REQUESTS]
    assert set(summary["steps"]) == {"fast", HOSTILE, "fail", "g"}
    for name, row in rows.items():
        figures = summary if name == ALL_REQUESTS else summary["steps"][name]
        for field in STEP_FIELDS:
            assert float(row[field]) == figures[field], (name, field)
        for field in LATENCY_FIELDS:
            assert float(row[field]) == figures["latency_ms"][field], (name, field)
    assert float(rows["fail"]["errors"]) == summary["steps"]["fail"]["requests"] > 0


def test_the_page_fetches_nothing_carries_plotly_packed_and_stays_under_a_megabyte(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    with Store.open(store_url) as store:
        html = render_run_report(load_run(store, run_id))
    page = ReportPage(html)
    assert page.fetched == []  # no src= or href= anywhere: no CDN, no stylesheet, no image
    assert len(page.scripts) == 5
    # The first script is the vendored basic bundle, gzip then base64: it unpacks to exactly
    # the file shipped in horde/report/vendor/ (read here from the source tree, not the code).
    vendored = Path(__file__).resolve().parents[1] / "python/horde/report/vendor/plotly-basic.min.js"
    assert unpacked(html, "plotly-js") == vendored.read_bytes()
    assert "DecompressionStream" in page.scripts[1] and "HordeLinkedAxes" in page.scripts[2]
    assert page.scripts[3] and "Plotly.newPlot" in page.scripts[4]
    assert len(html.encode("utf-8")) < 1_000_000  # issue 41: the full plotly.js made it 4.9 MB


def test_user_text_is_escaped_everywhere(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    with Store.open(store_url) as store:
        html = render_run_report(load_run(store, run_id))
    assert HOSTILE not in html
    assert "x&lt;/script&gt;&lt;b&gt;&#34;y&#34;&amp;" in html  # in the table
    assert "build=&lt;42&gt;" in html  # tags
    page = ReportPage(html)
    labels = [button["label"] for button in page.figures["chart-latency"]["layout"]["updatemenus"][0]["buttons"]]
    assert HOSTILE in labels
    assert len(page.scripts) == 5  # the name did not open or close a script


def test_figures_are_the_stored_seconds(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    with Store.open(store_url) as store:
        results = load_run(store, run_id)
    figures = ReportPage(render_run_report(results)).figures
    assert list(figures) == [
        "chart-throughput",
        "chart-latency",
        "chart-distribution",
        "chart-errors",
        "chart-load",
        "chart-generator",
    ]
    full = [s for s in results.snapshots if not s["final"] or s["interval_s"] >= 0.5]
    requests = figures["chart-throughput"]["data"][0]
    assert requests["x"] == [s["elapsed_s"] for s in full]
    assert requests["y"] == pytest.approx(
        [sum(e["requests"] for e in s["steps"] if e["kind"] == "request") / s["interval_s"] for s in full]
    )
    buttons = figures["chart-latency"]["layout"]["updatemenus"][0]["buttons"]
    assert [b["label"] for b in buttons] == [ALL_REQUESTS, *results.summary["steps"]]
    assert len(figures["chart-latency"]["data"]) == 5 * len(buttons)
    distribution = {trace["name"]: trace for trace in figures["chart-distribution"]["data"]}
    assert set(distribution) == {ALL_REQUESTS, "fast", HOSTILE, "fail", "g"}
    for trace in distribution.values():
        assert trace["y"][-1] == pytest.approx(100.0) and trace["y"] == sorted(trace["y"])
    # The distribution's top is the step's maximum latency, as the summary has it.
    assert distribution["fast"]["x"][-1] == results.summary["steps"]["fast"]["latency_ms"]["max"]
    assert [trace["name"] for trace in figures["chart-errors"]["data"]] == ["status_503"]
    assert "target VUs" in [trace["name"] for trace in figures["chart-load"]["data"]]


def test_summary_sections_are_shown_when_the_run_stored_them(
    stored: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store_url, run_id = stored
    copy_id = copy_run(
        store_url,
        run_id,
        summary_extra={
            "thresholds": [
                {"condition": "p95 < 500ms", "measured": 12.5, "passed": True, "message": "ok"},
                {"condition": "errors < 1%", "measured": 33.3, "passed": False, "message": "33.3 % of requests failed"},
            ],
            "autostop": {"reason": "errors", "message": "stopped at 3 s: errors > 10% for 2 s"},
            "capacity": {"max_rps": 1234.5, "knee_vus": 40},
        },
    )
    with Store.open(store_url) as store:
        results = load_run(store, copy_id)
    html = render_run_report(results)
    code, out, err = cli(store_url, capsys, "show", copy_id, "--json")
    assert code == ExitCode.OK, err
    assert results.summary == json.loads(out)  # judged sections kept as stored, as show keeps them
    for title in ("Thresholds", "Autostop", "Capacity"):
        assert f">{title}</h2>" in html
    assert '<tr class="failed">' in html and '<tr class="passed">' in html
    assert "33.3 % of requests failed" in html and "stopped at 3 s: errors &gt; 10% for 2 s" in html
    assert "knee_vus" in html and "1234.5" in html
    with Store.open(store_url) as store:
        plain = render_run_report(load_run(store, run_id))
    assert ">Thresholds</h2>" not in plain


def test_a_saturated_generator_is_flagged(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    # Late timers while the generator used its CPU: saturated (with little CPU: starved).
    copy_id = copy_run(store_url, run_id, snapshot_changes={"timer_lateness_p99_ms": 50.0, "cpu_percent": 10_000.0})
    with Store.open(store_url) as store:
        results = load_run(store, copy_id)
        html = render_run_report(results)
    seconds = results.summary["generator"]["saturated_seconds"]
    assert seconds > 0
    assert 'id="saturation-warning"' in html and f"saturated for {seconds} s" in html
    assert len(ReportPage(html).figures["chart-generator"]["layout"]["shapes"]) == seconds
    with Store.open(store_url) as store:
        assert 'id="saturation-warning"' not in render_run_report(load_run(store, run_id))


def test_comparison_report_has_the_verdicts_of_compare(stored: tuple[str, str]) -> None:
    store_url, run_id = stored
    copy_id = copy_run(store_url, run_id)
    with Store.open(store_url) as store:
        runs = [load_run(store, run_id), load_run(store, copy_id)]
    html = render_comparison_report(runs)
    page = ReportPage(html)
    verdicts = re.findall(r'<tr data-step="([^"]*)" data-verdict="([^"]*)"', html)
    expected = compare_runs(*runs)
    assert len(verdicts) == len(expected.steps) == 5
    assert [verdict for _, verdict in verdicts] == [step.verdict for step in expected.steps]
    assert {verdict for _, verdict in verdicts} == {"no significant change"}  # a run against its own copy
    for figure in ("chart-throughput", "chart-p95", "chart-load"):
        assert [trace["name"] for trace in page.figures[figure]["data"]] == [run_id + " (build=<42>)", copy_id]
    assert page.fetched == []


def test_report_command_errors_and_default_file_name(
    stored: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store_url, run_id = stored
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(store_url, capsys, "report", run_id)
    assert code == ExitCode.OK, err
    assert (tmp_path / f"report-{run_id}.html").is_file()
    code, _, err = cli(store_url, capsys, "report", run_id, run_id)
    assert code == ExitCode.OK, err
    assert (tmp_path / f"comparison-{run_id}-vs-{run_id}.html").is_file()
    for args, words in (
        (("report", "nosuchrun"), "no run matches"),
        (("report", run_id, "-o", str(tmp_path)), "is a directory"),
        (("report", run_id, run_id, "--min-requests", "0"), "at least 1"),
    ):
        code, out, err = cli(store_url, capsys, *args)
        assert code == ExitCode.INVALID_INPUT, (args, out, err)
        assert "error:" in err and words in err and "Traceback" not in err


def test_a_run_without_snapshots_still_has_a_report(stored: tuple[str, str]) -> None:
    """A run that failed before its first second (the engine refused to start) is stored too."""
    store_url, run_id = stored
    with Store.open(store_url) as store:
        empty_id = store.create_run(plan={}, plan_name="failed", parameters={}, tags={})
        store.finish_run(empty_id, status="failed", summary=None)
        empty, full = load_run(store, empty_id), load_run(store, run_id)
    page = ReportPage(render_run_report(empty))
    assert list(page.tables["steps"]) == [ALL_REQUESTS]
    assert page.tables["steps"][ALL_REQUESTS]["requests"] == "0"
    comparison = ReportPage(render_comparison_report([empty, full]))
    assert comparison.fetched == []
    assert {step.verdict for step in compare_runs(empty, full).steps} == {"not enough data"}


def test_a_find_max_run_shows_its_steps_and_the_knee(stored: tuple[str, str]) -> None:
    from test_find_max import search

    store_url, run_id = stored
    steering, _ = search(400, service_ms=10)
    capacity = steering.result()
    copy_id = copy_run(store_url, run_id, summary_extra={"capacity": capacity})
    with Store.open(store_url) as store:
        html = render_run_report(load_run(store, copy_id))
    page = ReportPage(html)
    # A table of steps, one row each with its verdict, instead of the block as raw JSON.
    section = html.split('id="section-capacity"')[1].split("<h2")[0]
    table = section.split('data-section="capacity-steps"')[1].split("</table>")[0]
    good = sum(step["saturated_reason"] is None for step in capacity["steps"])
    assert table.count('<tr class="passed">') == good
    assert table.count('<tr class="failed">') == len(capacity["steps"]) - good
    assert "throughput_flat" in table and "{" not in section.split('data-section="capacity-steps"')[0]
    assert "max sustainable req/s" in section and "knee within %" in section
    # Load–throughput and load–latency, the knee marked at the answer's level.
    throughput = page.figures["chart-capacity-throughput"]
    knee = next(trace for trace in throughput["data"] if trace["name"] == "knee")
    assert knee["x"] == [capacity["level_at_max"]] and knee["y"][0] == pytest.approx(capacity["max_rps"], abs=0.001)
    assert page.figures["chart-capacity-latency"]["layout"]["yaxis"]["type"] == "log"
    assert 'id="chart-capacity-throughput"' in html and 'id="chart-capacity-latency"' in html


def target_response_time_answer(outcome: str) -> dict[str, Any]:
    """The capacity block of target response time steered over a simulated server (queue_sim):
    ``held`` (closed VUs thinking 100 ms before an M/M/4 queue; T = p95 40 ms is held) or
    ``cliff`` (four servers of exactly 10 ms fed evenly: 10 ms up to 400/s, then a queue without
    bound, so no level holds p95 40 ms)."""
    from queue_sim import QueueServer, drive
    from test_target_response_time import CLOSED, OPEN, closed_mm4, steering_for

    if outcome == "held":
        steering, server = steering_for(CLOSED, 40), closed_mm4(1)
    else:
        steering = steering_for({**OPEN, "arrivals": "uniform"}, 40)
        server = QueueServer(servers=4, service_ms=10.0, model="open", service="constant", arrivals="uniform")
    drive(steering, server, 150)
    answer = steering.result()
    assert answer["outcome"] == outcome, answer["sentence"]
    return answer


def capacity_section(html: str) -> str:
    return html.split('id="section-capacity"')[1].split("<h2")[0]


def facts_shown(html: str) -> list[tuple[str, str]]:
    """The capacity facts table's (label, text) rows, in order."""
    table = capacity_section(html).split('data-section="capacity"')[1].split("</table>")[0]
    return [
        (unescape(label), unescape(value))
        for label, value in re.findall(r'<tr><th class="name">(.*?)</th><td class="name">(.*?)</td></tr>', table)
    ]


def readings_shown(html: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The readings table: its headings, and each row's class with its cells' text."""
    table = capacity_section(html).split('data-section="capacity-readings"')[1].split("</table>")[0]
    headings = [unescape(heading) for heading in re.findall(r'<th class="name">(.*?)</th>', table)]
    rows = [
        (verdict, [unescape(cell) for cell in re.findall(r'<td class="name">(.*?)</td>', cells)])
        for verdict, cells in re.findall(r'<tr class="(passed|failed)">(.*?)</tr>', table)
    ]
    return headings, rows


def report_with_capacity(stored: tuple[str, str], capacity: dict[str, Any]) -> str:
    store_url, run_id = stored
    copy_id = copy_run(store_url, run_id, summary_extra={"capacity": capacity})
    with Store.open(store_url) as store:
        return render_run_report(load_run(store, copy_id))


def test_a_target_response_time_run_that_held_t_reads_as_held(stored: tuple[str, str]) -> None:
    capacity = target_response_time_answer("held")
    html = report_with_capacity(stored, capacity)
    shown = facts_shown(html)
    facts = dict(shown)
    labels = [label for label, _ in shown]
    # The sentence first, then the facts in the order a performance engineer reads them.
    assert shown[0] == ("answer", capacity["sentence"]) and capacity["sentence"].startswith("T held:")
    order = [
        "answer",
        "outcome",
        "target",
        "level held",
        "rate held",
        "seconds T held",
        "converged after",
        "highest level under T",
        "lowest level over T",
    ]
    assert [label for label in labels if label in order] == order, labels
    assert facts["outcome"] == "T held"
    assert facts["target"] == "p95 40 ms, latency timed from each request's send; held within ±10 % (36 to 44 ms)"
    assert facts["level held"].startswith(f"{capacity['level_at_max']:,.0f} VUs")
    assert facts["rate held"].startswith(f"{capacity['max_rps']:,.1f} req/s successful")
    assert facts["p95 over the held seconds"] == f"{capacity['latency_ms_at_max']:,.2f} ms"
    assert facts["seconds T held"].startswith(
        f"{capacity['held_s']} of {capacity['tracked_s']} s after convergence ({capacity['held_percent']:g} %)"
    )
    assert facts["converged after"] == f"{capacity['converged_after_s']} s"
    highest = capacity["highest_under_target"]
    assert facts["highest level under T"] == (
        f"{highest['level']:,.0f} VUs: {highest['ok_rps']:,.1f} req/s successful, "
        f"p95 {highest['latency_ms']:,.2f} ms (judged at second {highest['second']})"
    )
    # Find-max's words are not this answer's; nor are the block's tables and series raw JSON.
    section = capacity_section(html)
    assert "max sustainable" not in html and "knee" not in section
    assert "{" not in section.split('data-section="capacity-readings"')[0]

    # The readings: one row each, coloured by verdict, the percentile with its interval.
    headings, rows = readings_shown(html)
    assert headings == [
        "reading",
        "at second",
        "phase",
        "level (VUs)",
        "verdict",
        "ok req/s",
        "p95 ms (interval)",
        "samples",
        "seconds",
    ]
    readings = capacity["readings"]
    expected = ["passed" if reading["verdict"] in ("under", "at") else "failed" for reading in readings]
    assert [verdict for verdict, _ in rows] == expected
    for (_, cells), reading in zip(rows, readings):
        assert cells[0] == str(reading["index"] + 1) and cells[1] == str(reading["judged_at_s"])
        assert cells[2] == reading["phase"] and cells[4].split(" ")[0] == reading["verdict"]
        assert cells[6].startswith(f"{reading['latency_ms']:,.2f} ({reading['low_ms']:,.2f}–")
        assert cells[7] == str(reading["samples"]) and cells[8] == str(reading["seconds"])

    # The chart over the run's time axis: T, its band, the percentile, the level, held seconds shaded.
    figure = ReportPage(html).figures["chart-capacity-target"]
    assert 'id="chart-capacity-target"' in html and figure["layout"]["meta"] == "time-axis"
    history = capacity["history"]
    seconds = [float(entry["second"]) for entry in history]
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert traces["T: p95 40 ms"]["y"] == [40.0, 40.0] and traces["T: p95 40 ms"]["x"] == [0.0, seconds[-1]]
    band = figure["data"].index(traces["±10 % of T"])
    assert figure["data"][band - 1]["y"] == pytest.approx([36.0, 36.0])
    assert traces["±10 % of T"]["y"] == pytest.approx([44.0, 44.0]) and traces["±10 % of T"]["fill"] == "tonexty"
    level = traces["level (VUs)"]
    assert level["yaxis"] == "y2" and level["x"] == seconds and level["y"] == [entry["level"] for entry in history]
    assert traces["p95 over the last 30 s"]["y"] == [entry.get("held_window_ms") for entry in history]
    assert traces["p95 of the level's window"]["y"] == [entry["latency_ms"] for entry in history]
    assert traces["readings"]["x"] == [reading["judged_at_s"] for reading in readings]
    shaded = [
        shape for shape in figure["layout"]["shapes"] if shape["type"] == "rect" and shape["fillcolor"] == "#2ca02c"
    ]
    assert sum(shape["x1"] - shape["x0"] for shape in shaded) == capacity["held_s"] > 0
    assert {"converged"} <= {note["text"] for note in figure["layout"]["annotations"]}
    assert figure["layout"]["yaxis"] == {"title": {"text": "ms"}, "rangemode": "tozero"}


def test_a_target_response_time_run_that_did_not_hold_t_never_reads_as_a_maximum(stored: tuple[str, str]) -> None:
    capacity = target_response_time_answer("cliff")
    assert capacity["max_rps"] is not None  # the highest level under T: a rate, yet not a maximum
    html = report_with_capacity(stored, capacity)
    shown = facts_shown(html)
    facts = dict(shown)
    assert shown[0] == ("answer", capacity["sentence"]) and capacity["sentence"].startswith("T cannot be held")
    assert facts["outcome"] == "T cannot be held: latency jumps past T between two adjacent levels"
    assert "level held" not in facts and "rate held" not in facts
    highest, lowest = capacity["highest_under_target"], capacity["lowest_over_target"]
    for label, reading in (("highest level under T", highest), ("lowest level over T", lowest)):
        assert facts[label].startswith(f"{reading['level']:,.1f} arrivals/s: {reading['ok_rps']:,.1f} req/s"), facts
    assert facts["seconds T held"].startswith(f"{capacity['held_s']} of {capacity['tracked_s']} s")
    assert "max sustainable" not in html and "knee" not in capacity_section(html)
    headings, rows = readings_shown(html)
    assert headings[3] == "level (arrivals/s)" and len(rows) == len(capacity["readings"])
    assert "failed" in {verdict for verdict, _ in rows}
    figure = ReportPage(html).figures["chart-capacity-target"]
    assert "level (arrivals/s)" in [trace["name"] for trace in figure["data"]]
    # Past the cliff latency is many times T: the axis stops at 3 × T so that T's band stays legible.
    assert max(reading["latency_ms"] for reading in capacity["readings"]) > 3 * 40
    assert figure["layout"]["yaxis"]["range"] == [0, 120.0]


@pytest.mark.parametrize(
    ("outcome", "limit", "words"),
    [
        ("unreachable", None, "T unreachable: even the lowest level was over T"),
        (
            "not_reached",
            "generator_saturated",
            "T not reached: latency stayed under T at the highest level allowed (the generator's own CPU)",
        ),
        ("kept_crossing", None, "T not held: latency kept crossing T"),
        ("not_converged", None, "not converged: the run ended before the level settled"),
    ],
)
def test_target_response_time_facts_word_each_outcome(outcome: str, limit: str | None, words: str) -> None:
    capacity = {
        "method": "target_response_time",
        "by": "pace",
        "level_unit": "pace",
        "percentile": 99,
        "target_ms": 250.0,
        "outcome": outcome,
        "limit": limit,
        "sentence": "the steering's own sentence",
        "latency_basis": "from_send",
        "converged_after_s": None,
        "held_s": 0,
        "tracked_s": 0,
        "held_percent": None,
        "set_aside_s": 3,
        "max_rps": None,
        "level_at_max": None,
        "latency_ms_at_max": None,
        "samples_needed": 1000,
        "highest_under_target": {"level": 1.5, "ok_rps": 80.0, "latency_ms": 120.0, "second": 30},
        "lowest_over_target": None,
        "readings": [],
        "history": [],
        "stopped_by_steering": False,
        "notes": ["3 s set aside: generator starved"],
        "what_broke_first": {"sentence": "db CPU first"},
        "a_newer_key": 7,
    }
    facts = capacity_facts(capacity)
    assert facts[:2] == [("answer", "the steering's own sentence"), ("outcome", words)]
    shown = dict(facts)
    assert shown["target"].startswith("p99 250 ms") and shown["converged after"] == "did not converge"
    assert shown["steered by"].startswith("the pace of a fixed population")
    assert shown["highest level under T"] == "pace ×1.5: 80.0 req/s successful, p99 120.00 ms (judged at second 30)"
    assert "lowest level over T" not in shown and "seconds T held" not in shown
    assert shown["what broke first"] == "db CPU first" and shown["a_newer_key"] == 7
    assert facts[-1] == ("note", "3 s set aside: generator starved")
    assert not any("max" in label or "knee" in label for label, _ in facts)


def test_a_run_nothing_answered_shows_no_latency_figure(tmp_path: Path) -> None:
    """Every request refused (a closed port): no response was timed, so the page gives no p95
    (the summary's 0 ms is a figure nothing measured), and says why."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    store_url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run_id = record_run(store_url, plan_dict(closed_port, [get("home", "/")], vus=1, duration_s=1.0))
    with Store.open(store_url) as store:
        results = load_run(store, run_id)
    assert results.summary["responses"] == 0 and results.summary["requests"] > 0
    html = render_run_report(results)
    rows = ReportPage(html).tables["steps"]
    for name in ("home", ALL_REQUESTS):
        assert all(rows[name][field] == "–" for field in LATENCY_FIELDS), rows[name]
        assert float(rows[name]["errors"]) == results.summary["requests"]
    headline = html.split('id="headline"')[1].split("</div>\n\n")[0]
    assert re.search(r'data-field="p95">– \(no responses\)', headline)
