"""The monitors of a run: each source read on its own thread, on the run's time axis.

:meth:`Monitoring.open` builds the plan's sources and connects each (one that cannot be reached
is a warning, and is tried again at each reading: a gap in its series, not a failed run).
:meth:`Monitoring.begin` is called the moment the engine starts: it takes each source's first
reading (the base its rates are measured from) and starts one thread per source, which reads it
at seconds ``interval_s``, ``2 × interval_s``, ... of the run, so sample N lines up with the
snapshot of second N. The conductor takes the samples with :meth:`drain` once a second; the
threads never wait for it, and the engine never waits for them.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence

from horde.monitors.host import HostSource
from horde.monitors.prometheus import PrometheusSource
from horde.monitors.source import Source, SourceUnavailable
from horde.plan.monitors import HostMonitor, Monitor, PrometheusMonitor
from horde.store import MonitorSample


def source_for(monitor: Monitor) -> Source:
    """The source that reads a monitor of the plan."""
    if isinstance(monitor, HostMonitor):
        return HostSource(monitor)
    if isinstance(monitor, PrometheusMonitor):
        return PrometheusSource(monitor)
    # Loaded here: it brings psycopg (a tenth of a second), which a run without a postgres
    # monitor never needs (`bench/NOTES.md`, the open model's start-up).
    from horde.monitors.postgres import PostgresSource

    return PostgresSource(monitor)


class _Watcher(threading.Thread):
    """One source's thread: reads it at each of its seconds until told to stop."""

    def __init__(
        self,
        source: Source,
        interval_s: int,
        start_monotonic: float,
        start_unix: float,
        out: queue.SimpleQueue[MonitorSample],
        stop: threading.Event,
    ) -> None:
        super().__init__(name=f"horde-monitor-{source.name}", daemon=True)
        self.source = source
        self.interval_s = interval_s
        self._start_monotonic = start_monotonic
        self._start_unix = start_unix
        self._out = out
        self._stop_event = stop
        #: Seconds each reading took (for bench/ and the summary).
        self.read_seconds: list[float] = []
        self.cpu_seconds = 0.0

    def run(self) -> None:
        # The first reading is the base the rates are measured from; only its gap is kept.
        base = self.read_once(0, time.monotonic())
        if base.error is not None:
            self._out.put(base)
        tick = 1
        while True:
            due = self._start_monotonic + tick * self.interval_s
            if self._stop_event.wait(max(0.0, due - time.monotonic())):
                return
            # A reading that took longer than the interval skips the seconds it overran, so
            # the series stays on the run's axis rather than drifting behind it.
            now = time.monotonic()
            tick = max(tick, int((now - self._start_monotonic) // self.interval_s))
            self._out.put(self.read_once(tick * self.interval_s, now))
            tick += 1

    def read_once(self, second: int, now: float) -> MonitorSample:
        started_cpu = time.thread_time()
        try:
            values: dict[str, float] | None = self.source.read(now)
            error = None
        except SourceUnavailable as unavailable:
            values, error = None, str(unavailable)
        finally:
            self.cpu_seconds += time.thread_time() - started_cpu
        self.read_seconds.append(time.monotonic() - now)
        elapsed = now - self._start_monotonic
        return MonitorSample(
            monitor=self.source.name,
            second=second,
            elapsed_s=round(elapsed, 3),
            timestamp=self._start_unix + elapsed,
            values=values,
            error=error,
        )


class Monitoring:
    """A run's monitors: open them, begin with the engine, drain samples, close."""

    def __init__(self, sources: Sequence[tuple[Source, int]], warnings: list[str]) -> None:
        self._sources = list(sources)
        #: One line per source that could not be reached at the start (shown, and stored).
        self.warnings = warnings
        self._queue: queue.SimpleQueue[MonitorSample] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._watchers: list[_Watcher] = []

    @classmethod
    def open(cls, monitors: Sequence[Monitor]) -> Monitoring:
        sources: list[tuple[Source, int]] = []
        warnings: list[str] = []
        for monitor in monitors:
            source = source_for(monitor)
            try:
                source.open()
            except SourceUnavailable as error:
                warnings.append(f"monitor {monitor.name}: {error}; its series will have gaps until it answers")
            sources.append((source, monitor.interval_s))
        return cls(sources, warnings)

    @property
    def names(self) -> list[str]:
        return [source.name for source, _ in self._sources]

    @property
    def kinds(self) -> dict[str, str]:
        return {source.name: source.kind for source, _ in self._sources}

    def begin(self) -> None:
        """Starts the threads; each takes its source's first reading (the base of its rates) at once."""
        start_monotonic, start_unix = time.monotonic(), time.time()
        for source, interval_s in self._sources:
            watcher = _Watcher(source, interval_s, start_monotonic, start_unix, self._queue, self._stop)
            self._watchers.append(watcher)
            watcher.start()

    def drain(self) -> list[MonitorSample]:
        """The samples read since the last call, in the order they were read."""
        samples: list[MonitorSample] = []
        while True:
            try:
                samples.append(self._queue.get_nowait())
            except queue.Empty:
                return samples

    def cost(self) -> dict[str, dict[str, float]]:
        """Per monitor: readings, CPU seconds of the control plane they took, slowest reading."""
        return {
            watcher.source.name: {
                "readings": float(len(watcher.read_seconds)),
                "cpu_s": watcher.cpu_seconds,
                "slowest_read_s": max(watcher.read_seconds, default=0.0),
            }
            for watcher in self._watchers
        }

    def close(self) -> list[MonitorSample]:
        """Stops the threads and the sources; returns the samples not drained yet."""
        self._stop.set()
        for watcher in self._watchers:
            watcher.join(timeout=10)
        for source, _ in self._sources:
            try:
                source.close()
            except Exception:  # noqa: BLE001 - closing a source must never fail the run's end
                pass
        return self.drain()
