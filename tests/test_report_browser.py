"""The reports open offline in a real headless browser (Debian's chromium) and draw their charts.

The browser gets no name resolution at all (every host maps to NOTFOUND), so a page that
needed a CDN would show no charts. Each page is loaded from disk; the DOM after the scripts ran
must hold plotly's drawn SVG in every chart's element, and the steps table must carry `horde
show --json`'s numbers (read by the real `horde` command). Screenshots and the pages are kept in
test-artifacts/ at the repository root.

Skipped when chromium is missing, unless HORDE_REQUIRE_BROWSER=1 (CI), which fails instead.
The tests never download a browser.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cdp import Browser, chromium_or_skip
from conftest import HordeCli
from horde.profile import PlanOptions, ProfileOptions, build_profile, render_page, write_plan
from horde.report import write_report
from horde.results.stored_run import ALL_REQUESTS, load_run
from horde.store import Store
from recorded_runs import get, plan_dict, record_run
from test_profile import known_log
from test_report import LATENCY_FIELDS, STEP_FIELDS, ReportPage, copy_run, page_figures, target_response_time_answer

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
RUN_CHARTS = (
    "chart-throughput",
    "chart-latency",
    "chart-distribution",
    "chart-errors",
    "chart-load",
    "chart-generator",
)
COMPARISON_CHARTS = ("chart-throughput", "chart-p95", "chart-distribution", "chart-load")


def open_in_browser(page: Path, screenshot: Path, profile: Path) -> str:
    """The page's DOM once its scripts ran; a screenshot of its top is written on the way."""
    command = [
        chromium_or_skip(),
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        # No host resolves: the page must need nothing from the network.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        # Virtual time lets plotly finish drawing before the DOM is taken, without real waiting.
        "--virtual-time-budget=15000",
        "--window-size=1400,2000",
        f"--screenshot={screenshot}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def assert_charts_drawn(dom: str, chart_ids: tuple[str, ...]) -> None:
    """Each chart's element holds plotly's SVG with one drawn trace
    group per trace the page's figure shows (traces hidden until picked are not drawn), and a
    line or bar of points: the series were drawn, not only the axes."""
    figures = page_figures(dom)
    positions = {chart_id: dom.find(f'id="{chart_id}"') for chart_id in chart_ids}
    assert all(position >= 0 for position in positions.values()), positions
    # A chart's element ends where the page's next figure begins (listed here or not).
    starts = sorted(dom.find(f'id="{figure_id}"') for figure_id in figures) + [len(dom)]
    for chart_id, start in positions.items():
        chunk = dom[start : next(position for position in starts if position > start)]
        assert 'class="main-svg"' in chunk, f"{chart_id} was not drawn"
        shown = [
            trace for trace in figures[chart_id]["data"] if trace.get("visible", True) not in (False, "legendonly")
        ]
        drawn = re.findall(r'class="trace (scatter|bars)', chunk)
        assert len(drawn) == len(shown) > 0, f"{chart_id}: {len(drawn)} trace groups drawn for {len(shown)} traces"
        # A line of two points or more (a legend's sample is "M5,0h30"), or a bar's path.
        assert re.search(r'class="js-line" d="M[\d.]+,[\d.]+[LHV]|<g class="point"><path d="M', chunk), (
            f"{chart_id} drew no series"
        )


@pytest.fixture(scope="module")
def stored_runs(builtin_target: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """(store path, run id, run id): two 2 s runs, /delay/5 then /delay/10, with a failing step."""
    store_path = tmp_path_factory.mktemp("browser") / "runs.sqlite"
    ids = [
        record_run(
            f"sqlite:///{store_path}",
            plan_dict(builtin_target.port, [get("item", path), get("missing", "/status/404")], vus=2, duration_s=2.0),
            tags={"build": str(build)},
        )
        for build, path in ((1, "/delay/5"), (2, "/delay/10"))
    ]
    return store_path, ids[0], ids[1]


def test_run_report_draws_in_a_browser_offline_with_the_numbers_of_horde_show(
    stored_runs: tuple[Path, str, str], tmp_path: Path
) -> None:
    store_path, run_id, _ = stored_runs
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "report-run.html"
    with Store.open(f"sqlite:///{store_path}") as store:
        write_report([load_run(store, run_id)], page)
    screenshot = ARTIFACTS / "report-run.png"
    screenshot.unlink(missing_ok=True)
    dom = open_in_browser(page, screenshot, tmp_path / "profile")

    assert_charts_drawn(dom, RUN_CHARTS)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    horde = HordeCli(tmp_path)
    shown = horde.run("show", run_id, "--json", "--store", str(store_path))
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    rows = ReportPage(dom).tables["steps"]
    assert list(rows) == [*summary["steps"], ALL_REQUESTS]
    for name, row in rows.items():
        figures = summary if name == ALL_REQUESTS else summary["steps"][name]
        for field in STEP_FIELDS:
            assert float(row[field]) == figures[field], (name, field)
        for field in LATENCY_FIELDS:
            assert float(row[field]) == figures["latency_ms"][field], (name, field)


def test_comparison_report_draws_in_a_browser_offline(stored_runs: tuple[Path, str, str], tmp_path: Path) -> None:
    store_path, baseline, candidate = stored_runs
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "report-comparison.html"
    with Store.open(f"sqlite:///{store_path}") as store:
        write_report([load_run(store, baseline), load_run(store, candidate)], page)
    screenshot = ARTIFACTS / "report-comparison.png"
    screenshot.unlink(missing_ok=True)
    dom = open_in_browser(page, screenshot, tmp_path / "profile")

    assert_charts_drawn(dom, COMPARISON_CHARTS)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # /delay/10 against /delay/5: the verdict the page shows is "slower".
    assert re.search(r'data-step="item" data-verdict="slower"', dom), "the verdict row is missing"


def test_a_target_response_time_report_draws_its_chart_zoomed_with_the_others(
    stored_runs: tuple[Path, str, str], tmp_path: Path
) -> None:
    store_path, run_id, _ = stored_runs
    store_url = f"sqlite:///{store_path}"
    copy_id = copy_run(store_url, run_id, summary_extra={"capacity": target_response_time_answer("cliff")})
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "report-target-response-time.html"
    with Store.open(store_url) as store:
        write_report([load_run(store, copy_id)], page)
    dom = open_in_browser(page, ARTIFACTS / "report-target-response-time.png", tmp_path / "dump-profile")
    assert_charts_drawn(dom, (*RUN_CHARTS, "chart-capacity-target"))
    assert "max sustainable" not in dom
    with Browser(tmp_path / "profile") as browser:
        browser.open(page.resolve().as_uri())
        browser.wait_for(
            "document.getElementById('chart-capacity-target').querySelector('.main-svg')",
            timeout_s=20,
            what="the target response time chart",
        )
        zoom = (
            "Plotly.relayout(document.getElementById('chart-capacity-target'), {'xaxis.range': [10, 60]})"
            ".then(() => true)"
        )
        assert browser.evaluate(zoom) is True
        browser.wait_for(
            "['chart-throughput', 'chart-latency', 'chart-generator'].every(id => "
            "JSON.stringify(document.getElementById(id).layout.xaxis.range) === '[10,60]')",
            timeout_s=10,
            what="the run's charts to follow the zoom",
        )
        assert browser.errors() == []


def test_the_production_profile_page_draws_in_a_browser_offline(tmp_path: Path) -> None:
    """`horde profile --html`'s page: the same shell, its rate and shares charts drawn."""
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    html = render_page(profile, write_plan(profile, tmp_path / "plan.yaml", PlanOptions()))
    assert len(html.encode("utf-8")) < 1_000_000
    ARTIFACTS.mkdir(exist_ok=True)
    page = ARTIFACTS / "profile.html"
    page.write_text(html)
    dom = open_in_browser(page, ARTIFACTS / "profile.png", tmp_path / "profile-browser")
    assert_charts_drawn(dom, ("rate-chart", "shares-chart"))
