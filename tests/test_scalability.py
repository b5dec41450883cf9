"""The scalability model against curves whose σ and κ are known: the parameters recovered within
their intervals, forecasts and counts against closed-form answers, the refusals, and a few seeds
of bench/scalability_backtest.py's out-of-sample check."""

from __future__ import annotations

import importlib
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from horde.results import scalability
from horde.results.scalability import Model, fit_scalability, fit_users

BENCH = Path(__file__).resolve().parent.parent / "bench"


def measured(
    truth: Model, counts: range | tuple[int, ...], repeats: int, noise: float, seed: int
) -> list[tuple[int, float]]:
    draw = random.Random(seed)
    return [(n, truth.throughput(n) * (1 + draw.gauss(0, noise))) for n in counts for _ in range(repeats)]


def usl(lam: float, sigma: float, kappa: float, n: float) -> float:
    # The law written out again, apart from the module's Model: the known answer.
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def test_known_parameters_are_recovered_within_their_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 20 noisy studies of one known system, each 90 % interval holds the true value in at
    least 15 (a right 90 % interval falls under 15 of 20 about 4 % of the time; these seeds are fixed)."""
    monkeypatch.setattr(scalability, "BOOTSTRAP_REPLICATES", 100)
    truth = Model(800.0, 0.04, 0.002)
    peak = math.sqrt((1 - 0.04) / 0.002)
    held = {"lam": 0, "sigma": 0, "kappa": 0, "peak": 0}
    for seed in range(20):
        fit = fit_scalability(measured(truth, range(1, 9), 3, 0.01, seed))
        assert fit.refusal is None and fit.model is not None
        for name in ("lam", "sigma", "kappa"):
            interval = fit.interval(name)
            assert interval is not None
            held[name] += interval[0] <= getattr(truth, name) <= interval[1]
        peaks = fit.peak_interval()
        assert peaks is not None
        held["peak"] += peaks[0] <= peak <= (peaks[1] or math.inf)
        assert fit.noise is not None and 0.004 < fit.noise < 0.02
    assert min(held.values()) >= 15, held


def test_an_exact_curve_is_fitted_exactly() -> None:
    points = [(n, usl(1200.0, 0.07, 0.003, n)) for n in (1, 2, 3, 5, 8)]
    fit = fit_scalability(points)
    assert fit.model is not None
    assert fit.model.lam == pytest.approx(1200.0, rel=1e-5)
    assert fit.model.sigma == pytest.approx(0.07, rel=1e-4)
    assert fit.model.kappa == pytest.approx(0.003, rel=1e-4)
    assert fit.model.peak_n() == pytest.approx(math.sqrt(0.93 / 0.003), rel=1e-4)
    forecast = fit.forecast(20)
    assert forecast.throughput == pytest.approx(usl(1200.0, 0.07, 0.003, 20), rel=1e-4)
    assert (
        forecast.low is not None and forecast.high is not None and forecast.low <= forecast.throughput <= forecast.high
    )


def test_without_coherency_there_is_no_peak() -> None:
    fit = fit_scalability([(n, usl(500.0, 0.1, 0.0, n)) for n in (1, 2, 4, 6)])
    assert fit.model is not None and fit.model.kappa == pytest.approx(0.0, abs=1e-9)
    assert fit.model.peak_n() is None and fit.model.best_whole_n() is None
    assert fit.to_dict()["peak_n"] is None


def test_a_curve_without_coherency_the_data_allow_stays_in_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """κ held at its bound of 0 bends every replicate down: unless the extra sum of squares F test
    rejects κ = 0, the curve without coherency is bootstrapped too and its band joined in."""
    monkeypatch.setattr(scalability, "BOOTSTRAP_REPLICATES", 100)
    # F(1, 9)'s 95th percentile is 5.117 (printed tables): a p-value of 5 % there.
    assert 1 - scalability._f_cdf(5.117, 1, 9) == pytest.approx(0.05, abs=5e-4)
    # Coherency the measured range shows clearly: κ = 0 is rejected, no second band.
    strong = fit_scalability(measured(Model(1000.0, 0.03, 0.01), (1, 2, 3, 4), 3, 0.002, 3))
    assert strong.kappa_zero_p is not None and strong.kappa_zero_p < scalability.NESTED_P
    assert not strong.nested_replicates
    # A curve fitted with κ at 0 is its own nested curve: nothing to reject.
    flat = fit_scalability(measured(Model(1000.0, 0.05, 0.0), (1, 2, 3, 4), 3, 0.01, 0))
    assert flat.model is not None
    if flat.model.kappa == 0:
        assert flat.kappa_zero_p == 1.0
    assert flat.kappa_zero_p is not None and flat.kappa_zero_p >= scalability.NESTED_P and flat.nested_replicates
    forecast = flat.forecast(16)
    assert forecast.low is not None and forecast.high is not None
    assert forecast.low <= usl(1000.0, 0.05, 0.0, 16) <= forecast.high


def test_the_same_points_give_the_same_answer() -> None:
    points = measured(Model(1000.0, 0.03, 0.001), (1, 2, 3, 4), 3, 0.02, 7)
    assert fit_scalability(points).to_dict() == fit_scalability(list(reversed(points))[::-1]).to_dict()


def test_fewer_than_three_counts_are_refused() -> None:
    fit = fit_scalability([(1, 1000.0), (2, 1900.0), (2, 1880.0), (1, 1010.0)])
    assert fit.model is None
    assert fit.refusal == "2 instance counts measured (1, 2): a fit of λ, σ and κ needs at least 3"
    assert fit.forecast(3).refusal == fit.refusal
    assert fit.instances_for(5000, 20).refusal == fit.refusal
    assert fit_scalability([]).refusal == "no instance count has a throughput to fit"


def test_a_step_the_law_cannot_draw_is_refused() -> None:
    step = [(n, 1000.0 if n <= 4 else 2000.0) for n in range(1, 9)]
    single = fit_scalability(step)
    assert single.model is None and single.refusal is not None
    assert "does not follow the scalability law" in single.refusal and "root mean square" in single.refusal
    # With repeats the noise is measured, and the misfit is judged against it.
    draw = random.Random(5)
    repeated = fit_scalability([(n, x * (1 + draw.gauss(0, 0.01))) for n, x in step for _ in range(2)])
    assert repeated.model is None and repeated.refusal is not None and "F test" in repeated.refusal
    # The same repeats around a true curve pass.
    assert fit_scalability(measured(Model(1000.0, 0.05, 0.002), range(1, 9), 2, 0.01, 5)).refusal is None


def test_a_forecast_far_past_the_measured_range_is_refused() -> None:
    fit = fit_scalability([(n, usl(1000.0, 0.05, 0.001, n)) for n in (1, 2, 3, 4, 5)])
    assert fit.forecast(20).throughput is not None  # 4× the largest measured
    refused = fit.forecast(21)
    assert refused.throughput is None
    assert (
        refused.refusal
        == "21 instances is past 4× the largest measured (5 instances): the model is not forecast beyond 20"
    )
    assert fit.forecast(0.5).refusal is not None


def test_the_model_reaches_only_as_far_as_its_interval_says_something() -> None:
    # One noisy run per count (1 spare degree of freedom): κ barely shows in 1..4, so far out the
    # 90 % interval spans most of the forecast and the model stops before 4×, saying why; the
    # measured range itself is never refused.
    truth = Model(1000.0, 0.05, 0.001)
    loose = fit_scalability(measured(truth, (1, 2, 3, 4), 1, 0.01, seed=5))
    assert loose.refusal is None
    assert 4 < loose.forecast_limit < 16
    far = loose.forecast(16)
    assert far.throughput is None and far.refusal is not None
    assert f"past {loose.forecast_limit:g} instances the 90 % interval" in far.refusal and "80 %" in far.refusal
    edge = loose.forecast(loose.forecast_limit)
    assert edge.throughput is not None and edge.low is not None and edge.high is not None
    assert edge.high - edge.low <= scalability.MAX_INTERVAL_WIDTH * edge.throughput
    assert all(loose.forecast(n).refusal is None for n in (1, 2, 3, 4))
    assert loose.to_dict()["forecast_limit"] == round(loose.forecast_limit, 2)
    # Three quiet runs per count tell the curve to 4×: the reach is the whole 4×.
    tight = fit_scalability(measured(truth, (1, 2, 3, 4), 3, 0.002, seed=5))
    assert tight.forecast_limit == 16 and tight.forecast(16).refusal is None


def test_three_points_fit_exactly_with_no_interval() -> None:
    fit = fit_scalability([(1, 1000.0), (2, 1800.0), (4, 2600.0)])
    assert fit.model is not None and fit.refusal is None and not fit.replicates
    assert fit.note is not None and "no interval" in fit.note
    forecast = fit.forecast(8)
    assert forecast.throughput is not None and forecast.low is None


def test_instances_for_a_peak_against_the_curve() -> None:
    fit = fit_scalability([(n, usl(1000.0, 0.05, 0.005, n)) for n in (1, 2, 3, 4, 6)])
    # 4,000/s with 20 % headroom needs 5,000/s of throughput: the first whole N the law gives it.
    need = 4000 / 0.8
    expected = next(n for n in range(1, 25) if usl(1000.0, 0.05, 0.005, n) >= need)
    answer = fit.instances_for(4000, 20)
    assert answer.refusal is None and answer.count == expected
    assert answer.low is not None and answer.high is not None and answer.low <= expected <= answer.high
    # Past the peak (√(0.95/0.005) ≈ 13.8: 14 instances) throughput falls: more is never enough.
    assert fit.model is not None and fit.model.best_whole_n() == 14
    top = usl(1000.0, 0.05, 0.005, 14)
    refused = fit.instances_for(top, 20)
    assert refused.count is None and refused.refusal is not None
    assert "peaks at" in refused.refusal and "14 instances" in refused.refusal
    # Without coherency the count grows without a peak, past what may be forecast.
    linear = fit_scalability([(n, usl(1000.0, 0.02, 0.0, n)) for n in (1, 2, 3, 4)])
    far = linear.instances_for(100_000, 20)
    assert far.count is None and far.refusal is not None
    assert far.refusal.startswith("it needs more than 16 instances") and "4× the largest measured" in far.refusal


def test_users_supported_at_a_per_user_rate() -> None:
    lam, sigma, kappa, rate = 100.0, 0.02, 0.0001, 20.0
    fit = fit_users([(n, usl(lam, sigma, kappa, n)) for n in (1, 10, 20, 40, 80)])
    assert fit.unit == "users"
    # X(N) ≥ N × rate ⇔ κN² + (σ − κ)N + 1 − σ − λ/rate ≤ 0: the positive root, rounded down.
    a, b, c = kappa, sigma - kappa, 1 - sigma - lam / rate
    root = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    answer = fit.users_supported(rate)
    assert answer.refusal is None and answer.count == math.floor(root)
    assert fit.users_supported(lam * 2).refusal is not None  # not even one user is served


def test_the_block_the_study_keeps() -> None:
    fit = fit_scalability(measured(Model(1000.0, 0.05, 0.002), (1, 2, 3, 4), 3, 0.01, 11))
    block = fit.to_dict()
    assert block["refusal"] is None and block["unit"] == "instances"
    assert block["sigma_interval"][0] <= block["sigma"] <= block["sigma_interval"][1]
    assert [point["n"] for point in block["curve"]] == [float(n) for n in range(1, 17)]
    assert all(point["low"] <= point["throughput"] <= point["high"] for point in block["curve"])


def test_backtest_few_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/scalability_backtest.py's check on a few seeds: forecasts at 2–4× the measured range
    within 10 % (median), their 90 % intervals covering at least 85 % of fresh measurements."""
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("scalability_backtest", None)
    bench = importlib.import_module("scalability_backtest")
    monkeypatch.setattr(scalability, "BOOTSTRAP_REPLICATES", 100)
    result = bench.backtest(12, 0.01)
    assert result.median_error() <= bench.MAX_MEDIAN_ERROR
    assert result.coverage() >= bench.MIN_COVERAGE
    # Without coherency, where κ's bound used to leave the intervals below the truth (80 % over
    # 200 seeds). 40 studies: over 12 a right 90 % interval falls under 85 % by chance too often.
    flat = bench.backtest(40, 0.01, system="no coherency (κ 0)")
    assert flat.coverage() >= bench.MIN_COVERAGE


# ----------------------------------------------------------------------------- horde scale


def stored_study(store_path: Path, throughputs: dict[int, float], *, inconsistent: int | None = None) -> str:
    """A study's runs written to the store as `horde scale` tags them: known throughputs (find-max
    knees), one of them found inconsistent by Little's law when asked."""
    from horde.store import Store

    study_id = "20261128-120000-abcd"
    with Store.open(f"sqlite:///{store_path}") as store:
        for count, throughput in throughputs.items():
            run_id = store.create_run(
                plan={}, plan_name="study", parameters={}, tags={"scale_study": study_id, "instances": str(count)}
            )
            summary: dict[str, object] = {"capacity": {"method": "find_max", "max_rps": throughput}}
            if count == inconsistent:
                summary["littles_law"] = {"consistent": False, "gap_percent": 40.0}
            store.finish_run(run_id, status="finished", summary=summary)
    return study_id


@pytest.mark.hand_made_summaries
def test_scale_from_a_stored_study_answers_instances_for_a_peak(horde_cli: Any, tmp_path: Path) -> None:
    curve = {n: usl(1000.0, 0.05, 0.005, n) for n in (1, 2, 3, 4, 6)}
    # A run found inconsistent is left out: its throughput (far off the curve) would refuse the fit.
    study_id = stored_study(horde_cli.store_path, {**curve, 5: 9_000.0}, inconsistent=5)
    out = tmp_path / "study.json"
    result = horde_cli.run(
        "scale",
        "--from-study",
        study_id,
        "--peak-rps",
        "4000",
        "--headroom",
        "20",
        "--summary-json",
        str(out),
        "--report",
        str(tmp_path / "study.html"),
    )
    assert result.returncode == 0, result.stderr
    study = json.loads(out.read_text())
    forecast = study["forecast"]
    assert forecast["refusal"] is None
    assert [row["instances"] for row in forecast["left_out"]] == [5]
    assert forecast["left_out"][0]["why"] == "inconsistent by Little's law"
    expected = next(n for n in range(1, 25) if usl(1000.0, 0.05, 0.005, n) >= 4000 / 0.8)
    peak = forecast["peak"]
    assert peak["instances_needed"] == expected and peak["throughput_falls_past"] == 14
    assert peak["instances_model"] == "scalability model"
    assert peak["answer"] in " ".join(result.stdout.split())
    # The terminal's forecasts at 2×, 3× and 4× the largest count measured (6), in the JSON too.
    assert [point["n"] for point in forecast["beyond"]] == [12, 18, 24]
    assert "forecast: 12 instances" in result.stdout and "· 24 instances" in result.stdout
    assert f"{expected} instances (" in peak["answer"] and "past 14 instances throughput falls" in peak["answer"]
    page = (tmp_path / "study.html").read_text()
    assert 'id="chart-scalability"' in page and peak["answer"] in page and "inconsistent by Little&#39;s law" in page


@pytest.mark.hand_made_summaries
def test_scale_refusals_are_sentences_not_tracebacks(horde_cli: Any) -> None:
    study_id = stored_study(horde_cli.store_path, {1: 1000.0, 2: 1900.0})
    result = horde_cli.run("scale", "--from-study", study_id, "--peak-rps", "5000")
    assert result.returncode == 0, result.stderr
    assert "no forecast: 2 instance counts measured (1, 2)" in " ".join(result.stdout.split())
    unknown = horde_cli.run("scale", "--from-study", "nothing-here")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "no stored run belongs to the scalability study 'nothing-here'" in unknown.stderr
    both = horde_cli.run("scale", "--from-study", study_id, "--instances", "3")
    assert both.returncode == 2 and "--from-study re-reads a stored study; --instances" in both.stderr
    bad = horde_cli.run("scale", "--from-study", study_id, "--headroom", "100")
    assert bad.returncode == 2 and "--headroom" in bad.stderr


@pytest.mark.hand_made_summaries
def test_the_dashboard_draws_the_study_beside_its_runs(horde_cli: Any, builtin_target: Any, tmp_path: Path) -> None:
    """A run of a study on the dashboard, in a real headless chromium: the study's answer for the
    peak it was asked and its chart (measured points, the model's curve in its band) drawn."""
    from cdp import Browser, chromium_or_skip
    from recorded_runs import get, plan_dict, record_run

    from horde.store import Store
    from horde.web import DashboardServer

    chromium_or_skip()
    study_id = stored_study(horde_cli.store_path, {n: usl(1000.0, 0.05, 0.005, n) for n in (2, 3, 4, 6)})
    tags = {"scale_study": study_id, "instances": "1", "scale_peak_rps": "4000", "scale_headroom": "20"}
    run_id = record_run(
        horde_cli.store_url, plan_dict(builtin_target.port, [get("home", "/")], vus=1, duration_s=1.0), tags=tags
    )
    with Store.open(horde_cli.store_url) as store:
        record = store.get_run(run_id)
        assert record.summary is not None
        knee = {"method": "find_max", "max_rps": usl(1000.0, 0.05, 0.005, 1)}
        store.finish_run(run_id, status="finished", summary={**record.summary, "capacity": knee})
    expected = next(n for n in range(1, 25) if usl(1000.0, 0.05, 0.005, n) >= 4000 / 0.8)
    with DashboardServer(horde_cli.store_url) as server, Browser(tmp_path / "profile") as browser:
        browser.open(f"{server.url}runs/{run_id}")
        drawn = browser.wait_for(
            "(() => { const chart = document.getElementById('chart-scalability');"
            " return chart && chart.querySelector('.main-svg') ? chart.data.map(trace => trace.name) : null; })()",
            timeout_s=30,
            what="the study's chart",
        )
        assert (
            drawn[0] == "measured" and "scalability model" in drawn and any("prediction interval" in n for n in drawn)
        )
        answer = browser.evaluate("document.getElementById('scale-study-answer').textContent")
        assert answer.startswith(f"{expected} instances (") and "past 14 instances throughput falls" in answer
        points = browser.evaluate("document.getElementById('chart-scalability').data[0].x")
        assert points == [1, 2, 3, 4, 6]
        browser.screenshot(Path(__file__).resolve().parents[1] / "test-artifacts" / "dashboard-scale-study.png")
        assert browser.errors() == []


@pytest.mark.hand_made_summaries
def test_the_study_report_draws_the_model_offline(horde_cli: Any, tmp_path: Path) -> None:
    """`horde scale --report`: the page, opened from disk in a real headless chromium, draws the
    measured points, the model's curve in its band, the peak N's line and the answer's."""
    from cdp import Browser, chromium_or_skip

    chromium_or_skip()
    study_id = stored_study(horde_cli.store_path, {n: usl(1000.0, 0.05, 0.005, n) for n in (1, 2, 3, 4, 6)})
    page = tmp_path / "study.html"
    result = horde_cli.run("scale", "--from-study", study_id, "--peak-rps", "4000", "--report", str(page))
    assert result.returncode == 0, result.stderr
    with Browser(tmp_path / "profile") as browser:
        browser.open(page.resolve().as_uri())
        drawn = browser.wait_for(
            "(() => { const chart = document.getElementById('chart-scalability');"
            " return chart && chart.querySelector('.main-svg') ? chart.data.map(trace => trace.name) : null; })()",
            timeout_s=30,
            what="the study's chart",
        )
        assert drawn[0] == "measured" and "scalability model" in drawn
        lines = browser.evaluate(
            "document.getElementById('chart-scalability').layout.shapes.map(shape => [shape.x0, shape.y0])"
        )
        # The peak N's line, the throughput the asked peak needs (4,000/s with 20 % headroom), its count.
        expected = next(n for n in range(1, 25) if usl(1000.0, 0.05, 0.005, n) >= 4000 / 0.8)
        assert [x for x, _ in lines if x != 0] == [pytest.approx(math.sqrt(0.95 / 0.005), abs=0.01), expected]
        assert [y for x, y in lines if x == 0] == [pytest.approx(5000.0)]
        browser.screenshot(Path(__file__).resolve().parents[1] / "test-artifacts" / "report-scale-study.png")
        assert browser.errors() == []


def test_a_study_run_live_keeps_its_forecast_and_asked_peak(horde_cli: Any, tmp_path: Path) -> None:
    """`horde scale` against 3 built-in targets, one second each: the study JSON has its forecast
    block, each row whether its run was consistent, and each run keeps the asked peak as tags."""
    from horde.store import Store

    out = tmp_path / "study.json"
    result = horde_cli.run(
        "scale",
        "--url",
        "http://127.0.0.1:1/",
        "--instances",
        "3",
        "--vus",
        "2",
        "--duration",
        "1s",
        "--peak-rps",
        "500",
        "--headroom",
        "25",
        "--summary-json",
        str(out),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    study = json.loads(out.read_text())
    assert [row["instances"] for row in study["rows"]] == [1, 2, 3]
    assert all(isinstance(row["consistent"], bool) for row in study["rows"])
    forecast = study["forecast"]
    assert forecast["unit"] == "instances" and "peak" in forecast
    assert forecast["peak"]["peak_rps"] == 500 and forecast["peak"]["headroom_percent"] == 25
    with Store.open(horde_cli.store_url) as store:
        tags = [record.tags for record in store.list_runs() if record.tags.get("scale_study") == study["study_id"]]
    assert len(tags) == 3 and all(t["scale_peak_rps"] == "500" and t["scale_headroom"] == "25" for t in tags)


def test_a_study_repeats_each_count_in_turn(horde_cli: Any, tmp_path: Path) -> None:
    """`--repeats 2` over 2 built-in targets: four runs, the counts in turn (1, 2, 1, 2), the rows
    by count, efficiency against the mean of the one-instance runs; a bad count is refused before
    any load, and a stored study is not run again."""
    from horde.store import Store

    out = tmp_path / "study.json"
    result = horde_cli.run(
        "scale",
        "--url",
        "http://127.0.0.1:1/",
        "--instances",
        "2",
        "--vus",
        "2",
        "--duration",
        "1s",
        "--repeats",
        "2",
        "--summary-json",
        str(out),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "1 instance(s) (run 2 of 2)" in result.stdout
    study = json.loads(out.read_text())
    rows = study["rows"]
    assert [row["instances"] for row in rows] == [1, 1, 2, 2]
    ones = [row["efficiency"] for row in rows if row["instances"] == 1]
    assert abs(sum(ones) / 2 - 1.0) <= 0.001 and all(row["throughput_rps"] > 0 for row in rows)
    with Store.open(horde_cli.store_url) as store:
        runs = [record for record in store.list_runs() if record.tags.get("scale_study") == study["study_id"]]
    in_order = sorted(runs, key=lambda record: record.started_at)
    assert [record.tags["instances"] for record in in_order] == ["1", "2", "1", "2"]
    for bad in ("0", "11"):
        refused = horde_cli.run("scale", "--url", "http://127.0.0.1:1/", "--instances", "2", "--repeats", bad)
        assert refused.returncode == 2 and "--repeats must be between 1 and 10" in refused.stderr, refused.stderr
    again = horde_cli.run("scale", "--from-study", study["study_id"], "--repeats", "3")
    assert again.returncode == 2 and "--from-study re-reads a stored study; --repeats" in again.stderr
