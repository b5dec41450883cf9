"""The engine layer: the only modules that import the native engine (``horde._engine``).

:mod:`~horde.engine.run` starts a plan on the engine and reads its snapshots, whose form
:mod:`~horde.engine.snapshot` declares; :mod:`~horde.engine.histogram` merges and reads the HDR
histograms the snapshots carry; :mod:`~horde.engine.target` serves the built-in target.
Everything above this layer reaches the engine through these modules (``tests/test_layout.py``
checks it).
"""

from horde.engine.histogram import Bucket, HistogramDecodeError, LatencyStats, buckets, from_values, merge, stats
from horde.engine.run import Run, checked_plan_json, engine_problems
from horde.engine.snapshot import Snapshot, StepSnapshot

__all__ = [
    "Bucket",
    "HistogramDecodeError",
    "LatencyStats",
    "Run",
    "Snapshot",
    "StepSnapshot",
    "buckets",
    "checked_plan_json",
    "engine_problems",
    "from_values",
    "merge",
    "stats",
]
