#!/usr/bin/env python3
"""The scalability model's out-of-sample error: studies simulated from known σ and κ, fitted on
1..4 instances and forecast at 8, 12 and 16 (2×, 3×, 4× the measured range), many seeds.

Each seed draws a system (λ = 1000/s, σ uniform in 0.01..0.08, κ from one of three ranges:
none, moderate — peaks between 22 and 70 instances, the case the acceptance figures are for —
and strong — peaks between 10 and 22, so that 16 may lie past the peak) and measures it as a
study with repeats would: 3 runs at each of 1, 2, 3, 4 instances, each off the true curve by
Gaussian relative noise. The forecast's
error is against the true curve (its median, and its median with its sign: above 0 the forecast
runs high); the 90 % prediction interval's coverage is against a fresh measurement at that count
(what a study of 8..16 instances would then see), and its width is (high − low) / forecast, the
median over seeds: an interval that covers by being useless shows there.

    .venv/bin/python bench/scalability_backtest.py              # 200 seeds per row (~8 min on 2 cores)
    .venv/bin/python bench/scalability_backtest.py --seeds 40   # quicker

Pure Python, no load: runs anywhere. Writes its table in bench/FIGURES.md (unless --no-readme).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from harness import write_readme_block
from horde.results import scalability

MEASURED = (1, 2, 3, 4)
REPEATS = 3
FORECAST = (8, 12, 16)
#: The acceptance figures of issue 39: median error at 2–4× and the 90 % intervals' coverage.
MAX_MEDIAN_ERROR = 0.10
MIN_COVERAGE = 0.85
#: The systems drawn: a name, and κ's range (σ is uniform in 0.01..0.08 for all).
SYSTEMS: dict[str, tuple[float, float]] = {
    "moderate κ 0.0002–0.002": (0.0002, 0.002),
    "no coherency (κ 0)": (0.0, 0.0),
    "strong κ 0.002–0.01": (0.002, 0.01),
}
MODERATE = "moderate κ 0.0002–0.002"


@dataclass
class Backtest:
    """Per forecast count: each seed's relative error and whether the interval held the measurement."""

    system: str
    noise: float
    errors: dict[int, list[float]]
    covered: dict[int, list[bool]]
    #: Signed relative errors (forecast − truth) / truth, and the intervals' relative widths.
    signed: dict[int, list[float]]
    widths: dict[int, list[float]]
    refused: int
    seeds: int

    def median_error(self, n: int | None = None) -> float:
        pooled = self.errors[n] if n is not None else [e for values in self.errors.values() for e in values]
        return statistics.median(pooled)

    def bias(self, n: int | None = None) -> float:
        pooled = self.signed[n] if n is not None else [e for values in self.signed.values() for e in values]
        return statistics.median(pooled)

    def width(self, n: int | None = None) -> float:
        pooled = self.widths[n] if n is not None else [w for values in self.widths.values() for w in values]
        return statistics.median(pooled)

    def coverage(self, n: int | None = None) -> float:
        pooled = self.covered[n] if n is not None else [c for values in self.covered.values() for c in values]
        return sum(pooled) / len(pooled)


def backtest(seeds: int, noise: float, *, system: str = MODERATE, first_seed: int = 0, workers: int = 1) -> Backtest:
    errors: dict[int, list[float]] = {n: [] for n in FORECAST}
    signed: dict[int, list[float]] = {n: [] for n in FORECAST}
    widths: dict[int, list[float]] = {n: [] for n in FORECAST}
    covered: dict[int, list[bool]] = {n: [] for n in FORECAST}
    jobs = [(seed, noise, system) for seed in range(first_seed, first_seed + seeds)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            outcomes = list(pool.map(_one_seed, jobs, chunksize=4))
    else:
        outcomes = [_one_seed(job) for job in jobs]
    refused = 0
    for outcome in outcomes:
        if outcome is None:
            refused += 1  # the lack-of-fit test at 1 % refuses about 1 in 100 true curves
            continue
        for n, (error, width, hit) in outcome.items():
            errors[n].append(abs(error))
            signed[n].append(error)
            widths[n].append(width)
            covered[n].append(hit)
    return Backtest(system, noise, errors, covered, signed, widths, refused, seeds)


def _one_seed(job: tuple[int, float, str]) -> dict[int, tuple[float, float, bool]] | None:
    """One simulated study: per forecast count, the signed relative error, the interval's relative
    width and whether it held a fresh measurement; None when the fit was refused."""
    seed, noise, system = job
    lowest, highest = SYSTEMS[system]
    draw = random.Random(seed)
    truth = scalability.Model(1000.0, draw.uniform(0.01, 0.08), draw.uniform(lowest, highest))
    points = [(n, truth.throughput(n) * (1 + draw.gauss(0, noise))) for n in MEASURED for _ in range(REPEATS)]
    fit = scalability.fit_scalability(points)
    if fit.model is None:
        return None
    outcome = {}
    for n in FORECAST:
        forecast = fit.forecast(n)
        assert forecast.throughput is not None and forecast.low is not None and forecast.high is not None
        true = truth.throughput(n)
        measured = true * (1 + draw.gauss(0, noise))
        outcome[n] = (
            (forecast.throughput - true) / true,
            (forecast.high - forecast.low) / forecast.throughput,
            forecast.low <= measured <= forecast.high,
        )
    return outcome


def table(results: list[Backtest], elapsed_s: float) -> str:
    lines = [
        "### Scalability model backtest (`bench/scalability_backtest.py`)",
        "",
        (
            f"Fitted on {REPEATS} runs at each of 1–4 instances; σ 0.01–0.08; {results[0].seeds} seeds per row; "
            f"{scalability.BOOTSTRAP_REPLICATES} bootstrap replicates; {elapsed_s:.0f} s in all."
        ),
        "",
        (
            "| systems | noise | forecast at | median error | median signed error | 90 % interval covers "
            "| interval width (median) | refused fits |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for n in FORECAST:
            lines.append(
                f"| {result.system} | {result.noise:.0%} | {n} ({n // MEASURED[-1]}×) | {result.median_error(n):.1%} "
                f"| {result.bias(n):+.1%} | {result.coverage(n):.0%} | {result.width(n):.0%} | {result.refused} |"
            )
        lines.append(
            f"| {result.system} | {result.noise:.0%} | **8–16 pooled** | **{result.median_error():.1%}** "
            f"| {result.bias():+.1%} | **{result.coverage():.0%}** | {result.width():.0%} | {result.refused} |"
        )
    judged = [result for result in results if result.system == MODERATE]
    lines.append("")
    lines.append(
        f"Acceptance (issue 39), on the moderate systems: median error ≤ {MAX_MEDIAN_ERROR:.0%} at 2–4×, "
        f"coverage ≥ {MIN_COVERAGE:.0%}."
    )
    missed = [
        f"{result.noise:.0%} noise at {n} ({what} {value:.1%})"
        for result in judged
        for n in FORECAST
        for what, value, bad in (
            ("median error", result.median_error(n), result.median_error(n) > MAX_MEDIAN_ERROR),
            ("coverage", result.coverage(n), result.coverage(n) < MIN_COVERAGE),
        )
        if bad
    ]
    pooled = all(r.median_error() <= MAX_MEDIAN_ERROR and r.coverage() >= MIN_COVERAGE for r in judged)
    if not missed:
        lines.append("Met at every count, and pooled.")
    else:
        lines.append(f"{'Met' if pooled else 'Not met'} pooled over 2–4×; not met at {'; '.join(missed)}.")
    short = [
        f"{result.system} {result.noise:.0%} at {n} ({result.coverage(n):.0%})"
        for result in results
        for n in FORECAST
        if result.coverage(n) < MIN_COVERAGE
    ]
    lines.append(
        f"Coverage ≥ {MIN_COVERAGE:.0%} on every row and count: "
        + ("met." if not short else f"not met at {'; '.join(short)}.")
    )
    far = FORECAST[-1]
    lines.append(
        f"At {far} ({far // MEASURED[-1]}×), the error against the bias (a signed error near the "
        "error would be a bias to correct; one near 0 is the noise the data leave, as wide as the interval): "
        + "; ".join(
            f"{result.system} {result.noise:.0%}: median error {result.median_error(far):.1%}, signed "
            f"{result.bias(far):+.1%}, interval {result.width(far):.0%} of the forecast wide"
            for result in results
        )
        + "."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--workers", type=int, default=0, help="processes (default: one per CPU)")
    parser.add_argument("--no-readme", action="store_true", help="print the table only")
    arguments = parser.parse_args()
    started = time.monotonic()
    rows = [(MODERATE, 0.01), (MODERATE, 0.02), ("no coherency (κ 0)", 0.01), ("strong κ 0.002–0.01", 0.01)]
    workers = arguments.workers or os.cpu_count() or 1
    results = [backtest(arguments.seeds, noise, system=system, workers=workers) for system, noise in rows]
    text = table(results, time.monotonic() - started)
    print(text)
    if not arguments.no_readme:
        write_readme_block("scalability-backtest", text, section="Scalability model backtest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
