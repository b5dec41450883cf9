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
median over seeds: an interval that covers by being useless shows there. A forecast whose interval
is wider than ``MAX_INTERVAL_WIDTH`` of itself is refused as not known (the model's reach): the
table gives the share given, and the error and coverage of those given; the error had every
forecast been given is there too, for the whole picture.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from harness import write_readme_block
from horde.results import scalability

T = TypeVar("T")

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
    """Per forecast count, over the forecasts given: each seed's relative error and whether the
    interval held the measurement; and every seed's error had its forecast been given."""

    system: str
    noise: float
    errors: dict[int, list[float]]
    all_errors: dict[int, list[float]]
    #: The studies whose fit was not refused (each gave a forecast at a count or refused it).
    fitted: int
    covered: dict[int, list[bool]]
    #: Signed relative errors (forecast − truth) / truth, and the intervals' relative widths.
    signed: dict[int, list[float]]
    widths: dict[int, list[float]]
    refused: int
    seeds: int

    def given_share(self, n: int | None = None) -> float:
        counts = 1 if n is not None else len(self.errors)
        return len(_pooled(self.errors, n)) / (self.fitted * counts) if self.fitted else 0.0

    def median_error_all(self, n: int | None = None) -> float:
        return statistics.median(_pooled(self.all_errors, n))

    def median_error(self, n: int | None = None) -> float:
        return statistics.median(_pooled(self.errors, n))

    def bias(self, n: int | None = None) -> float:
        return statistics.median(_pooled(self.signed, n))

    def width(self, n: int | None = None) -> float:
        return statistics.median(_pooled(self.widths, n))

    def coverage(self, n: int | None = None) -> float:
        pooled = _pooled(self.covered, n)
        return sum(pooled) / len(pooled)


def _pooled(by_count: dict[int, list[T]], n: int | None) -> list[T]:
    """One count's values, or every count's together (n None)."""
    return by_count[n] if n is not None else [value for values in by_count.values() for value in values]


def backtest(seeds: int, noise: float, *, system: str = MODERATE, first_seed: int = 0, workers: int = 1) -> Backtest:
    errors: dict[int, list[float]] = {n: [] for n in FORECAST}
    all_errors: dict[int, list[float]] = {n: [] for n in FORECAST}
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
        for n, (error, width, hit, was_given) in outcome.items():
            all_errors[n].append(abs(error))
            if not was_given:
                continue
            errors[n].append(abs(error))
            signed[n].append(error)
            widths[n].append(width)
            covered[n].append(hit)
    fitted = seeds - refused
    return Backtest(system, noise, errors, all_errors, fitted, covered, signed, widths, refused, seeds)


def _one_seed(job: tuple[int, float, str]) -> dict[int, tuple[float, float, bool, bool]] | None:
    """One simulated study: per forecast count, the signed relative error, the interval's relative
    width, whether it held a fresh measurement (all as the forecast would have been), and whether
    the model gave it; None when the fit was refused."""
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
        value, low, high = fit._predicted(n)  # what it would have been, refused or not
        true = truth.throughput(n)
        measured = true * (1 + draw.gauss(0, noise))
        outcome[n] = ((value - true) / true, (high - low) / value, low <= measured <= high, forecast.refusal is None)
    return outcome


def _of_given(result: Backtest, n: int, figure: Callable[[int], float], form: str) -> str:
    """A figure over the forecasts given at ``n``, or a dash where none was."""
    return format(figure(n), form) if result.errors[n] else "–"


def table(results: list[Backtest], elapsed_s: float) -> str:
    lines = [
        "### Scalability model backtest (`bench/scalability_backtest.py`)",
        "",
        (
            f"Fitted on {REPEATS} runs at each of 1–4 instances; σ 0.01–0.08; {results[0].seeds} seeds per row; "
            f"{scalability.BOOTSTRAP_REPLICATES} bootstrap replicates; a forecast whose 90 % interval is wider "
            f"than {scalability.MAX_INTERVAL_WIDTH * 100:.0f} % of itself is refused as not known; {elapsed_s:.0f} s in all."
        ),
        "",
        (
            "| systems | noise | forecast at | given | median error (given) | median error (had all been given) "
            "| median signed error | 90 % interval covers | interval width (median) | refused fits |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for n in FORECAST:
            lines.append(
                f"| {result.system} | {result.noise:.0%} | {n} ({n // MEASURED[-1]}×) | {result.given_share(n):.0%} "
                f"| {_of_given(result, n, result.median_error, '.1%')} | {result.median_error_all(n):.1%} "
                f"| {_of_given(result, n, result.bias, '+.1%')} | {_of_given(result, n, result.coverage, '.0%')} | {_of_given(result, n, result.width, '.0%')} | {result.refused} |"
            )
        lines.append(
            f"| {result.system} | {result.noise:.0%} | **8–16 pooled** | {result.given_share():.0%} "
            f"| **{result.median_error():.1%}** | {result.median_error_all():.1%} "
            f"| {result.bias():+.1%} | **{result.coverage():.0%}** | {result.width():.0%} | {result.refused} |"
        )
    judged = [result for result in results if result.system == MODERATE]
    lines.append("")
    lines.append(
        f"Acceptance (issue 39), on the moderate systems: of the forecasts given at 2–4×, median error ≤ "
        f"{MAX_MEDIAN_ERROR * 100:.0f} % and coverage ≥ {MIN_COVERAGE * 100:.0f} %."
    )
    missed = [
        f"{result.noise:.0%} noise at {n} ({what} {value:.1%})"
        for result in judged
        for n in FORECAST
        if result.errors[n]
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
        if result.errors[n] and result.coverage(n) < MIN_COVERAGE
    ]
    lines.append(
        f"Coverage ≥ {MIN_COVERAGE:.0%} on every row and count given: "
        + ("met." if not short else f"not met at {'; '.join(short)}.")
    )
    far = FORECAST[-1]
    lines.append(
        f"At {far} ({far // MEASURED[-1]}×), how much the reach leaves out, and what it keeps: "
        + "; ".join(
            f"{result.system} {result.noise:.0%}: {result.given_share(far):.0%} given, median error "
            f"{_of_given(result, far, result.median_error, '.1%')} (had all been given {result.median_error_all(far):.1%}), signed {_of_given(result, far, result.bias, '+.1%')}"
            for result in results
        )
        + ". A refused forecast says how far the model reaches and to measure a larger count or repeat runs."
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
