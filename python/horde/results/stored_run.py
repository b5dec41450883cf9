"""A stored run read back for analysis: its record, snapshots, summary, merged histograms and
monitors' samples.

Export, comparison and reports all start here, so they agree with ``horde show`` to the digit:
the summary is recomputed from the stored histograms exactly as ``horde show`` does (same
worker count for the saturation rule), and per-step histograms are exact merges, never
averages of per-second percentiles.

>>> step_names([("s", "home"), ("t", "home"), ("s", "item")])
{('s', 'home'): 's/home', ('t', 'home'): 't/home', ('s', 'item'): 'item'}
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from horde.engine import histogram
from horde.store import MonitorSample, RunRecord, Store
from horde.results.summary import Summary, step_key, summarise, with_stored_blocks
from horde.engine.snapshot import Snapshot

#: The label of the row (and key) that stands for every request step of a run together.
ALL_REQUESTS: Final = "all requests"

#: A step's identity in a run: (scenario, step).
StepId = tuple[str, str]


def workers_of(record: RunRecord) -> int:
    """The engine worker count the run had, as ``horde show`` reads it (its saturation rule
    depends on it)."""
    return int(record.parameters.get("workers") or os.cpu_count() or 1)


def step_names(step_ids: Iterable[StepId]) -> dict[StepId, str]:
    """Each step's name as the summary keys it: its own name, or ``scenario/step`` when several
    scenarios have a step of that name."""
    ids = list(dict.fromkeys(step_ids))
    names = [step for _, step in ids]
    ambiguous = {name for name in names if names.count(name) > 1}
    return {(scenario, step): step_key(scenario, step, ambiguous) for scenario, step in ids}


@dataclass
class RunResults:
    """One stored run with everything the analyses read from it."""

    record: RunRecord
    snapshots: list[Snapshot]
    #: The summary exactly as ``horde show RUN --json`` prints it: recomputed from the stored
    #: histograms, with the sections judged at the end of the run as stored.
    summary: Summary
    workers: int
    #: The summary keys kept as stored rather than recomputed (see :meth:`stored_sections`).
    stored_keys: tuple[str, ...] = ()
    #: Each monitor's samples (the target's side), by monitor name, in order of second.
    monitor_samples: dict[str, list[MonitorSample]] = field(default_factory=dict)
    _merged: dict[StepId, bytes] | None = field(default=None, repr=False)

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def step_ids(self) -> list[StepId]:
        """Every step that had an outcome, in order of first appearance."""
        seen: dict[StepId, None] = {}
        for snapshot in self.snapshots:
            for entry in snapshot["steps"]:
                seen.setdefault((entry["scenario"], entry["step"]), None)
        return list(seen)

    def step_kinds(self) -> dict[StepId, str]:
        kinds: dict[StepId, str] = {}
        for snapshot in self.snapshots:
            for entry in snapshot["steps"]:
                kinds.setdefault((entry["scenario"], entry["step"]), entry.get("kind") or "request")
        return kinds

    def merged_histograms(self) -> dict[StepId, bytes]:
        """Each step's histogram over the whole run (exact merge), computed once."""
        if self._merged is None:
            parts: dict[StepId, list[bytes]] = {}
            for snapshot in self.snapshots:
                for entry in snapshot["steps"]:
                    parts.setdefault((entry["scenario"], entry["step"]), []).append(entry["histogram"])
            self._merged = {step_id: histogram.merge(blobs) for step_id, blobs in parts.items()}
        return self._merged

    def all_requests_histogram(self) -> bytes:
        """Every request step merged (groups left out: their passes are made of requests
        already counted), as the summary's overall figures are."""
        kinds = self.step_kinds()
        return histogram.merge(
            blob for step_id, blob in self.merged_histograms().items() if kinds[step_id] == "request"
        )

    def stored_sections(self) -> dict[str, Any]:
        """The summary's sections judged when the run ended and kept as stored (``thresholds``,
        ``autostop``, ``capacity``, ``sight``...): every key the recomputation does not make."""
        return {key: value for key, value in self.summary.items() if key in self.stored_keys}


def load_run(store: Store, ref: str) -> RunResults:
    """The run named by ``ref`` (an id, a unique prefix of one, or ``last``).

    Raises :class:`~horde.errors.RunNotFound` as ``horde show`` does.
    """
    record = store.get_run(ref)
    snapshots = store.snapshots(record.run_id)
    workers = workers_of(record)
    summary = summarise(snapshots, run_id=record.run_id, status=record.status, workers=workers, plan=record.plan)
    # What was judged when the run ended (thresholds, autostop, capacity) cannot be recomputed
    # from the snapshots alone, so it is kept as stored.
    stored = with_stored_blocks(summary, record.summary)
    return RunResults(
        record=record,
        snapshots=snapshots,
        summary=summary,
        workers=workers,
        stored_keys=stored,
        monitor_samples=store.monitor_samples(record.run_id),
    )
