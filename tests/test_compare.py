"""Comparing runs: the Mann–Whitney U test over histogram buckets, the verdict rule, the ground
truth of real runs (/delay/20 against /delay/30 differs; /delay/20 against itself does not), the
`horde compare` and `horde trend` commands, and HDR bucket decoding against the engine's reading.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

from horde.engine import histogram
from horde.cli import app, main
from horde.cli.results import register
from horde.results.compare import (
    ComparisonRule,
    Gate,
    RankTest,
    compare_runs,
    judge,
    mann_whitney_u,
    regressions,
    trend,
)
from horde.errors import ExitCode
from horde.engine.histogram import Bucket, HistogramDecodeError, buckets
from horde.results.stored_run import ALL_REQUESTS, RunResults, load_run
from horde.store import Store
from recorded_runs import get, plan_dict, record_run
from synthetic import entry

register(app)


def spread(center_us: int, width_us: int, per_value: int) -> list[Bucket]:
    """A bell-ish distribution: counts falling off linearly around ``center_us``."""
    return [
        Bucket(center_us + offset, center_us + offset, per_value * (width_us - abs(offset)) + 1)
        for offset in range(-width_us + 1, width_us)
    ]


def brute_force_u_test(a: list[int], b: list[int]) -> tuple[float, float]:
    """U of ``b`` and the two-sided p-value from the expanded samples, the textbook way."""
    u = sum((y > x) + 0.5 * (y == x) for x in a for y in b)
    pooled = sorted(a + b)
    ties: dict[int, int] = {}
    for value in pooled:
        ties[value] = ties.get(value, 0) + 1
    n_a, n_b, n = len(a), len(b), len(a) + len(b)
    variance = n_a * n_b / 12 * ((n + 1) - sum(t**3 - t for t in ties.values()) / (n * (n - 1)))
    z = max(abs(u - n_a * n_b / 2) - 0.5, 0) / math.sqrt(variance)
    return u, math.erfc(z / math.sqrt(2))


# -- the statistic on known distributions --------------------------------------------------------


def test_identical_distributions_give_p_one_and_no_tendency() -> None:
    sample = spread(20_000, 300, 5)
    test = mann_whitney_u(sample, sample)
    assert test.p_value == pytest.approx(1.0)
    assert test.probability_of_superiority == 0.5
    assert test.z == 0.0


def test_a_shift_gives_a_tiny_p_value_in_the_right_direction() -> None:
    before = spread(20_000, 300, 5)
    after = spread(21_000, 300, 5)  # +5 %
    slower = mann_whitney_u(before, after)
    assert slower.p_value < 1e-12 and slower.z > 0 and slower.probability_of_superiority > 0.9
    faster = mann_whitney_u(after, before)
    assert faster.p_value == pytest.approx(slower.p_value) and faster.z < 0
    assert faster.probability_of_superiority == pytest.approx(1 - slower.probability_of_superiority)


def test_buckets_give_the_same_u_and_p_as_the_expanded_samples() -> None:
    generator = random.Random(7)
    for _ in range(20):
        a = [generator.randint(1, 12) for _ in range(generator.randint(2, 40))]
        b = [generator.randint(2, 14) for _ in range(generator.randint(2, 40))]
        as_buckets = lambda values: [Bucket(v, v, values.count(v)) for v in sorted(set(values))]  # noqa: E731
        test = mann_whitney_u(as_buckets(a), as_buckets(b))
        u, p = brute_force_u_test(a, b)
        assert test.u == u
        assert test.p_value == pytest.approx(p, rel=1e-9, abs=1e-15)
        assert test.probability_of_superiority == pytest.approx(u / (len(a) * len(b)))


def test_degenerate_samples_are_never_significant() -> None:
    one_bucket = [Bucket(500, 500, 1000)]
    assert mann_whitney_u(one_bucket, one_bucket).p_value == 1.0
    assert mann_whitney_u([], one_bucket).p_value == 1.0


def test_the_rule_needs_significance_and_a_relevant_shift() -> None:
    rule = ComparisonRule()
    significant_slower = RankTest(50_000, 50_000, 0.0, 9.0, p_value=1e-20, probability_of_superiority=0.8)
    significant_faster = RankTest(50_000, 50_000, 0.0, -9.0, p_value=1e-20, probability_of_superiority=0.2)
    ms = {"p50": 5.0, "p90": 5.0}  # absolute moves well above the 0.1 ms floor
    assert judge(significant_slower, {"p50": 0.30, "p90": 0.01}, ms, rule)[0] == "slower"
    assert judge(significant_slower, {"p50": 0.01, "p90": 0.06}, ms, rule)[0] == "slower"
    # Significant but small: large samples find any shift, this one does not matter.
    assert judge(significant_slower, {"p50": 0.02, "p90": 0.04}, ms, rule)[0] == "no significant change"
    # +10 % of 50 µs is 5 µs: under the absolute floor.
    assert (
        judge(significant_slower, {"p50": 0.1, "p90": 0.1}, {"p50": 0.005, "p90": 0.005}, rule)[0]
        == "no significant change"
    )
    # A percentile moving against the test's direction is not evidence for it.
    assert (
        judge(significant_slower, {"p50": -0.3, "p90": -0.2}, {"p50": -5.0, "p90": -5.0}, rule)[0]
        == "no significant change"
    )
    assert judge(significant_faster, {"p50": -0.3, "p90": 0.0}, {"p50": -5.0, "p90": 0.0}, rule)[0] == "faster"
    not_significant = RankTest(50_000, 50_000, 0.0, 1.3, p_value=0.2, probability_of_superiority=0.51)
    assert judge(not_significant, {"p50": 0.5, "p90": 0.5}, ms, rule)[0] == "no significant change"
    few = RankTest(5, 500, 0.0, 5.0, 1e-9, 0.9)
    verdict, reason = judge(few, {"p50": 0.5, "p90": 0.5}, ms, rule)
    assert verdict == "not enough data" and "5 requests" in reason
    with pytest.raises(ValueError):
        ComparisonRule(alpha=0.0)


# -- HDR buckets agree with the engine's count, extremes and percentiles ---------------------------


def test_decoded_buckets_agree_with_the_engines_count_min_max_and_percentiles(
    ground_truth: dict[str, RunResults],
) -> None:
    quantiles = [0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0]
    blobs = [results.all_requests_histogram() for results in ground_truth.values()]
    blobs += [
        entry["histogram"] for results in ground_truth.values() for s in results.snapshots for entry in s["steps"]
    ]
    for blob in blobs:
        found = buckets(blob)
        stats = histogram.stats(blob, quantiles)
        total = sum(bucket.count for bucket in found)
        assert total == stats.count > 0
        assert found[0].lowest_us == round(stats.min_ms * 1000)
        assert found[-1].highest_us == round(stats.max_ms * 1000)
        for quantile in quantiles[1:]:
            # HDR's rule: the first bucket whose running count reaches ceil(q × count), read at its top.
            wanted = max(1, math.ceil(quantile / 100 * total))
            running = 0
            for bucket in found:
                running += bucket.count
                if running >= wanted:
                    break
            assert bucket.highest_us == round(stats.percentile(quantile) * 1000), quantile
    with pytest.raises(HistogramDecodeError):
        buckets(b"not a histogram at all, not even close")


# -- ground truth: real runs against the built-in target ------------------------------------------


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('compare') / 'runs.sqlite'}"


@pytest.fixture(scope="module")
def ground_truth(builtin_target: Any, store_url: str) -> Iterator[dict[str, RunResults]]:
    """Three 3 s runs of 4 VUs, one after the other: /delay/20 twice, then /delay/30. The step
    has the same name in each (one plan, a new build of the target), tagged build=1..3."""
    ids = {}
    for label, path in (("delay20", "/delay/20"), ("delay20 again", "/delay/20"), ("delay30", "/delay/30")):
        plan = plan_dict(builtin_target.port, [get("item", path)], vus=4, duration_s=3.0)
        ids[label] = record_run(store_url, plan, tags={"build": str(len(ids) + 1)})
    with Store.open(store_url) as store:
        yield {label: load_run(store, run_id) for label, run_id in ids.items()}


def test_delay_20_against_delay_30_is_slower(ground_truth: dict[str, RunResults]) -> None:
    comparison = compare_runs(ground_truth["delay20"], ground_truth["delay30"])
    assert [step.name for step in comparison.steps] == ["item", ALL_REQUESTS]
    for step in comparison.steps:
        assert step.verdict == "slower", step
        assert step.test is not None and step.test.p_value < 1e-6
        assert step.test.probability_of_superiority > 0.9
        # 30 ms against 20 ms: the median is half as long again (the target's overhead aside).
        assert 0.35 < (step.relative_change["p50"] or 0) < 0.6
        assert step.relative_change["rps"] is not None and step.relative_change["rps"] < -0.2
    assert comparison.different
    backwards = compare_runs(ground_truth["delay30"], ground_truth["delay20"])
    assert [step.verdict for step in backwards.steps] == ["faster", "faster"]


def test_delay_20_against_itself_is_not_different(ground_truth: dict[str, RunResults]) -> None:
    comparison = compare_runs(ground_truth["delay20"], ground_truth["delay20 again"])
    for step in comparison.steps:
        assert step.verdict == "no significant change", step
        assert step.test is not None and step.test.n_baseline > 300
        assert abs(step.relative_change["p50"] or 0) < 0.05
    assert not comparison.different


def test_figures_are_those_of_the_summary(ground_truth: dict[str, RunResults]) -> None:
    baseline, candidate = ground_truth["delay20"], ground_truth["delay30"]
    comparison = compare_runs(baseline, candidate)
    step, total = comparison.steps
    for figures, summary in (
        (step.baseline, baseline.summary["steps"]["item"]),
        (step.candidate, candidate.summary["steps"]["item"]),
        (total.baseline, baseline.summary),
        (total.candidate, candidate.summary),
    ):
        assert figures is not None
        assert figures.requests == summary["requests"] and figures.rps == summary["rps"]
        assert figures.latency_ms == {
            key: summary["latency_ms"][key] for key in ("p50", "p90", "p95", "p99", "mean", "max")
        }
    assert step.error_percent_change == 0.0
    assert step.change_ms["p50"] == pytest.approx(
        candidate.summary["steps"]["item"]["latency_ms"]["p50"] - baseline.summary["steps"]["item"]["latency_ms"]["p50"]
    )
    assert step.test is not None and step.test.n_baseline == baseline.summary["requests"]


def test_steps_of_different_names_are_paired_when_each_run_has_one(
    ground_truth: dict[str, RunResults], store_url: str
) -> None:
    """Two `horde run --url` runs of different paths name their steps after the paths."""
    source = ground_truth["delay30"]
    with Store.open(store_url) as store:
        renamed = store.create_run(plan={}, plan_name="url", parameters={"workers": 1}, tags={})
        for snapshot in source.snapshots:
            steps = [{**entry, "step": "GET /delay/30"} for entry in snapshot["steps"]]
            store.add_snapshot(renamed, {**snapshot, "steps": steps})
        store.finish_run(renamed, status="finished", summary=None)
        candidate = load_run(store, renamed)
    comparison = compare_runs(ground_truth["delay20"], candidate)
    assert [step.name for step in comparison.steps] == ["item vs GET /delay/30", ALL_REQUESTS]
    assert [step.verdict for step in comparison.steps] == ["slower", "slower"]
    assert "share no step" in comparison.notes[0]


def test_horde_compare_prints_the_verdicts(
    ground_truth: dict[str, RunResults], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, candidate = ground_truth["delay20"].run_id, ground_truth["delay30"].run_id
    capsys.readouterr()
    assert main(["compare", baseline, candidate[:17], "--json", "--store", store_url]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    assert (document["baseline_id"], document["candidate_id"]) == (baseline, candidate)
    assert [step["verdict"] for step in document["steps"]] == ["slower", "slower"]
    assert document["steps"][0]["test"]["name"].startswith("Mann-Whitney U")
    assert document["rule"] == {
        "alpha": 0.01,
        "min_relative_change": 0.05,
        "min_absolute_change_ms": 0.1,
        "min_requests": 20,
    }

    assert main(["compare", baseline, candidate, "--store", store_url, "--min-change", "80"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "item" in out and out.count("no significant change") == 2

    assert main(["compare", baseline, "nosuchrun", "--store", store_url]) == ExitCode.INVALID_INPUT
    assert "no run matches" in capsys.readouterr().err
    assert main(["compare", baseline, candidate, "--store", store_url, "--alpha", "2"]) == ExitCode.INVALID_INPUT
    assert "alpha" in capsys.readouterr().err


# -- --fail-on: the exit a CI job gates a build on ------------------------------------------------


def test_fail_on_exits_18_when_a_step_is_significantly_slower_by_more_than_the_margin(
    ground_truth: dict[str, RunResults], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    d20, d20_again, d30 = (ground_truth[label].run_id for label in ("delay20", "delay20 again", "delay30"))

    def horde_compare(*args: str) -> int:
        return main(["compare", *args, "--store", store_url])

    capsys.readouterr()
    # /delay/30 against /delay/20: every figure about half as long again.
    assert horde_compare(d20, d30, "--fail-on", "p95:10%") == ExitCode.REGRESSION
    out = capsys.readouterr().out
    assert "REGRESSION (p95:10%) item: p95" in out and "REGRESSION (p95:10%) all requests: p95" in out
    assert "exit 18: 2 regression(s) beyond --fail-on p95:10%" in out
    # Within the margin, not different, or faster: no regression, exit 0.
    assert horde_compare(d20, d30, "--fail-on", "p95:80%") == ExitCode.OK
    assert "no regression beyond --fail-on p95:80%" in capsys.readouterr().out
    assert horde_compare(d20, d20_again, "--fail-on", "p50:0", "--fail-on", "mean") == ExitCode.OK
    assert horde_compare(d30, d20, "--fail-on", "p99:0%") == ExitCode.OK
    capsys.readouterr()
    # --json keeps stdout one document, with the gates and what failed them.
    code = horde_compare(d20, d30, "--json", "--fail-on", "mean:10%", "--fail-on", "errors:0")
    assert code == ExitCode.REGRESSION
    document = json.loads(capsys.readouterr().out)
    assert document["gates"] == ["mean:10%", "errors:0pt"]
    failed = [(r["gate"], r["step"]) for r in document["regressions"]]
    assert failed == [("mean:10%", "item"), ("mean:10%", ALL_REQUESTS)]
    assert all(35 < r["worse_by"] < 60 and r["p_value"] < 1e-6 for r in document["regressions"])
    # Throughput (a closed model: a third fewer requests a second) is judged on the seconds: three
    # against three cannot reach p < 0.01, and can reach p < 0.1.
    assert horde_compare(d20, d30, "--fail-on", "rps:10%") == ExitCode.OK
    assert horde_compare(d20, d30, "--fail-on", "rps:10%", "--alpha", "0.1") == ExitCode.REGRESSION
    assert "req/s" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flag, message",
    [("p96:10%", "'p96' is not a figure"), ("p95:ten", "'ten' is not a margin"), ("p95:-5%", "0 or more")],
)
def test_a_bad_fail_on_is_invalid_input(
    ground_truth: dict[str, RunResults], store_url: str, capsys: pytest.CaptureFixture[str], flag: str, message: str
) -> None:
    baseline, candidate = ground_truth["delay20"].run_id, ground_truth["delay30"].run_id
    capsys.readouterr()
    code = main(["compare", baseline, candidate, "--store", store_url, "--fail-on", flag])
    assert code == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err
    assert message in err and "hint: e.g. --fail-on p95:10%" in err


def stored_synthetic_run(store_url: str, seconds: list[list[dict[str, Any]]]) -> RunResults:
    """A run stored from known per-second step entries (synthetic.entry), ending on a short drain."""
    with Store.open(store_url) as store:
        run_id = store.create_run(plan={}, plan_name="synthetic", parameters={"workers": 1}, tags={})
        for number, steps in enumerate([*seconds, []], start=1):
            final = number == len(seconds) + 1
            store.add_snapshot(
                run_id,
                {
                    "second": number,
                    "elapsed_s": number - 1 + (0.01 if final else 1.0),
                    "interval_s": 0.01 if final else 1.0,
                    "timestamp": 1763819000.0 + number,
                    "final": final,
                    "steps": steps,
                    "active_vus": 4,
                    "busy_vus": 4,
                    "iterations": 10,
                    "dropped_arrivals": 0,
                    "connections_opened": 0,
                    "target_vus": 4,
                    "target_rate_per_s": None,
                    "cpu_percent": 5.0,
                    "timer_lateness_p99_ms": 0.1,
                },
            )
        store.finish_run(run_id, status="finished", summary=None)
        return load_run(store, run_id)


def test_a_slower_tail_alone_fails_a_p99_gate_and_not_a_p50_one(store_url: str) -> None:
    # 1 % of the baseline's requests take 9 ms, 5 % of the candidate's (its slowest 4 % of the
    # rest went there): the median and p90 hold, the rank test sees too small a shift (those
    # requests were the slowest already), and the p99 is four times longer.
    baseline = stored_synthetic_run(store_url, [[entry("pay", list(range(1000, 1990)) + [9000] * 10)]])
    candidate = stored_synthetic_run(store_url, [[entry("pay", list(range(1000, 1950)) + [9000] * 50)]])
    comparison = compare_runs(baseline, candidate)
    step = comparison.steps[0]
    assert step.verdict == "no significant change" and step.test is not None and step.test.p_value > 0.01
    assert step.relative_change["p50"] == 0.0 and step.relative_change["p90"] == 0.0
    assert step.tail_tests["p99"] < 1e-6 and step.tail_tests["p50"] == 1.0
    found = regressions(comparison, [Gate.parse("p99:50%"), Gate.parse("p50:0"), Gate.parse("p90:0")])
    assert [(r.gate, r.step) for r in found] == [("p99:50%", "pay"), ("p99:50%", ALL_REQUESTS)]
    assert "more of its requests lie above the baseline's p99" in found[0].sentence
    # The same tail, the other way round: faster is never a regression.
    assert regressions(compare_runs(candidate, baseline), [Gate.parse("p99:0")]) == []


def test_an_error_gate_needs_more_points_than_the_margin_and_a_significant_rise(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(failed_per_second: int) -> RunResults:
        second = [entry("pay", [2000] * 1000, errors={"status_503": failed_per_second})]
        return stored_synthetic_run(store_url, [second] * 3)

    baseline, worse, slightly = run(10), run(40), run(12)  # 1 %, 4 %, 1.2 % errors
    found = regressions(compare_runs(baseline, worse), [Gate.parse("errors:1"), Gate.parse("p95:0")])
    assert [(r.gate, r.step, r.worse_by) for r in found] == [
        ("errors:1pt", "pay", 3.0),
        ("errors:1pt", ALL_REQUESTS, 3.0),
    ]
    assert found[0].p_value < 1e-12 and "1.00 % → 4.00 %" in found[0].sentence
    assert regressions(compare_runs(baseline, worse), [Gate.parse("errors:5")]) == []  # within the margin
    # 30 errors against 36: chance.
    assert regressions(compare_runs(baseline, slightly), [Gate.parse("errors:0")]) == []
    capsys.readouterr()
    code = main(["compare", baseline.run_id, worse.run_id, "--store", store_url, "--fail-on", "errors:1%"])
    assert code == ExitCode.REGRESSION
    assert "REGRESSION (errors:1pt) pay: errors 1.00 % → 4.00 % (+3.00 points" in capsys.readouterr().out


def test_trend_lists_the_tagged_runs_oldest_first(
    ground_truth: dict[str, RunResults], store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Store.open(store_url) as store:
        points = trend(store, "build")
        only_two = trend(store, "build", tag_value="2")
    assert [p.tag_value for p in points] == ["1", "2", "3"]
    assert [p.run_id for p in points] == [r.run_id for r in ground_truth.values()]
    for point, results in zip(points, ground_truth.values()):
        assert point.steps["item"]["p95_ms"] == results.summary["steps"]["item"]["latency_ms"]["p95"]
        assert point.steps[ALL_REQUESTS]["rps"] == results.summary["rps"]
    assert [p.tag_value for p in only_two] == ["2"]
    capsys.readouterr()
    assert main(["trend", "build", "--json", "--store", store_url]) == ExitCode.OK
    assert [p["tag_value"] for p in json.loads(capsys.readouterr().out)] == ["1", "2", "3"]
    assert main(["trend", "build", "--step", "item", "--store", store_url]) == ExitCode.OK
    assert ground_truth["delay30"].run_id in capsys.readouterr().out
