"""The results layer: what a run leaves and what is drawn from it afterwards.

:mod:`~horde.results.summary` folds a run's snapshots into its summary (totals, exact
percentiles, the generator's health); :mod:`~horde.results.stored_run` reads a stored run back
for analysis; :mod:`~horde.results.compare` compares runs (a per-step statistical verdict, and
trends); :mod:`~horde.results.export` writes a run second by second as CSV or JSON.
"""

from horde.results.compare import ComparisonRule, RunComparison, compare_runs, trend
from horde.results.export import write_export
from horde.results.stored_run import RunResults, load_run
from horde.results.summary import SummaryBuilder, summarise

__all__ = [
    "ComparisonRule",
    "RunComparison",
    "RunResults",
    "SummaryBuilder",
    "compare_runs",
    "load_run",
    "summarise",
    "trend",
    "write_export",
]
