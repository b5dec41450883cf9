"""The monitors' part of conducting a run: open them before the load, begin with the engine, take
their samples each pass of the run loop (store, live diagnosis, autostop, the sinks' latest
figures), and at the end the summary's ``monitors`` block from what the store holds and, for a
steered run, what broke first.

Kept out of the conductor so that its loop reads as before: one call per pass, and a run without
monitors pays nothing (every method of the empty :class:`RunMonitors` returns at once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from horde.control.autostop import Firing, MonitorWatch
from horde.control.broke_first import what_broke_first
from horde.engine.snapshot import MonitorLatest, Snapshot
from horde.monitors import Diagnosis, Monitoring, monitors_block
from horde.monitors.crossings import limit_crossings
from horde.plan import Plan
from horde.plan.monitors import PrometheusMonitor
from horde.store import MonitorSample, Store
from horde.results.summary_blocks import MonitorsBlock


class _Notes(Protocol):
    def note(self, message: str) -> None: ...


class RunMonitors:
    """A run's monitors as the conductor drives them."""

    def __init__(self, plan: Plan, monitoring: Monitoring | None) -> None:
        self._plan = plan
        self._monitoring = monitoring
        self._diagnosis = Diagnosis(plan.monitors)
        self._watch = MonitorWatch(plan.autostop)
        #: Each monitor's latest figures (or its gap's reason), for the live view and the exporter.
        self.latest: dict[str, MonitorLatest] = {}

    @classmethod
    def open(cls, plan: Plan, sink: _Notes) -> RunMonitors:
        """Connects each monitor's source; one that cannot be reached is a warning, not a failure."""
        if not plan.monitors:
            return cls(plan, None)
        monitoring = Monitoring.open(plan.monitors)
        for warning in monitoring.warnings:
            sink.note(f"warning: {warning}")
        return cls(plan, monitoring)

    def begin(self) -> None:
        if self._monitoring is not None:
            self._monitoring.begin()

    def take(self, store: Store, run_id: str, sink: _Notes) -> Firing | None:
        """Stores the samples read since the last pass and judges them; an autostop firing on a
        monitor's condition, if one held."""
        if self._monitoring is None:
            return None
        return self._keep(self._monitoring.drain(), store, run_id, sink)

    def _keep(self, samples: list[MonitorSample], store: Store, run_id: str, sink: _Notes) -> Firing | None:
        if not samples:
            return None
        store.add_monitor_samples(run_id, samples)
        firing = None
        for sample in samples:
            self.latest[sample.monitor] = {"second": sample.second, "values": sample.values, "error": sample.error}
            for finding in self._diagnosis.observe(sample):
                sink.note(f"diagnosis: {finding.message}")
            if self._watch and firing is None:
                firing = self._watch.observe(sample)
        return firing

    def annotate(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot the sinks get: with each monitor's latest figures under ``monitors``."""
        if self._monitoring is None or not self.latest:
            return snapshot
        shown = snapshot.copy()
        shown["monitors"] = {name: latest.copy() for name, latest in self.latest.items()}
        return shown

    def close(self, store: Store | None = None, run_id: str | None = None) -> None:
        """Stops the sources; the samples not taken yet are stored when a store is given."""
        if self._monitoring is None:
            return
        rest = self._monitoring.close()
        if store is not None and run_id is not None and rest:
            store.add_monitor_samples(run_id, rest)

    def samples(self, store: Store, run_id: str) -> dict[str, list[MonitorSample]]:
        return store.monitor_samples(run_id) if self._monitoring is not None else {}

    def block(self, samples: dict[str, list[MonitorSample]]) -> MonitorsBlock | None:
        """The summary's ``monitors`` block, its diagnosis made again from the stored samples
        (so ``horde show`` on the stored run says the same)."""
        if self._monitoring is None:
            return None
        findings = Diagnosis(self._plan.monitors).observe_all(samples)
        node_exporters = {m.name for m in self._plan.monitors if isinstance(m, PrometheusMonitor) and m.node_exporter}
        block = monitors_block(self._monitoring.kinds, node_exporters, samples, findings, self._monitoring.warnings)
        block["cost"] = {
            name: {key: round(value, 4) for key, value in cost.items()}
            for name, cost in self._monitoring.cost().items()
        }
        return block

    def what_broke_first(
        self,
        capacity: Mapping[str, Any],
        snapshots: Sequence[Snapshot],
        samples: dict[str, list[MonitorSample]],
        block: MonitorsBlock,
    ) -> dict[str, Any] | None:
        """A steered run's capacity block's ``what_broke_first`` (the limits the monitors saw
        crossed beside the moment the load gave way, and find-max's knee by the utilization
        law); None without monitors."""
        if self._monitoring is None:
            return None
        crossings = limit_crossings(self._plan.monitors, samples, block.get("diagnosis", []))
        return what_broke_first(capacity, snapshots, self._plan.steer, crossings, self._monitoring.names, samples)
