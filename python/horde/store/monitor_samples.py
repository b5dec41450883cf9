"""Monitor samples in the store: what each monitor's source gave, second by second.

One row per monitor per second (``schema.monitor_samples``); a second its source could not be
read is a row with an ``error`` and no figures, so a gap is kept with its reason rather than
left as a hole nobody can explain.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select

from horde.store.schema import monitor_samples


@dataclass(frozen=True)
class MonitorSample:
    """One monitor's figures at one second of a run (or why there are none: a gap).

    ``second`` is on the snapshots' axis: second N covers (N - interval, N] since the run
    started; ``elapsed_s`` is when the source was actually read, ``timestamp`` the same as
    Unix time. ``values`` maps a metric (``cpu.busy_percent``, ``net.eth0.rx_bytes_per_s``,
    ``tables.public.items.dead_tuples``) to its value; rates are per second.
    """

    monitor: str
    second: int
    elapsed_s: float
    timestamp: float
    values: dict[str, float] | None
    error: str | None = None

    @property
    def is_gap(self) -> bool:
        return self.values is None


def sample_rows(run_id: str, samples: Sequence[MonitorSample]) -> list[dict[str, object]]:
    """The ``monitor_samples`` rows of some samples; values that are not finite numbers are
    left out (JSON has no NaN, and a figure that cannot be computed is better absent)."""
    rows: list[dict[str, object]] = []
    for sample in samples:
        values = (
            None
            if sample.values is None
            else {
                key: value
                for key, value in sample.values.items()
                if isinstance(value, (int, float)) and math.isfinite(value)
            }
        )
        rows.append(
            {
                "run_id": run_id,
                "monitor": sample.monitor,
                "second": sample.second,
                "elapsed_s": sample.elapsed_s,
                "timestamp": sample.timestamp,
                "values_json": None if values is None else json.dumps(values),
                "error": sample.error,
            }
        )
    return rows


def read_monitor_samples(
    connection: Connection, run_id: str, *, after_second: int = 0
) -> dict[str, list[MonitorSample]]:
    """A run's samples after ``after_second``, by monitor, each monitor's in order of second."""
    rows = (
        connection.execute(
            select(monitor_samples)
            .where(monitor_samples.c.run_id == run_id, monitor_samples.c.second > after_second)
            .order_by(monitor_samples.c.monitor, monitor_samples.c.second)
        )
        .mappings()
        .all()
    )
    found: dict[str, list[MonitorSample]] = {}
    for row in rows:
        values = (
            None
            if row["values_json"] is None
            else {key: float(value) for key, value in json.loads(row["values_json"]).items()}
        )
        found.setdefault(str(row["monitor"]), []).append(
            MonitorSample(
                monitor=str(row["monitor"]),
                second=int(row["second"]),
                elapsed_s=float(row["elapsed_s"]),
                timestamp=float(row["timestamp"]),
                values=values,
                error=row["error"],
            )
        )
    return found
