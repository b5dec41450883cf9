"""A generator: one engine process on a node of the cluster, as a Ray actor.

The coordinator (``horde.cluster.coordinator``) creates one per placement, asks it to describe
its node, calibrates it, hands it the plan with its slots and the agreed start instant, then
collects its snapshots once a second. This class is plain Python; the coordinator wraps it with
``ray.remote``, so this module imports nothing from Ray and runs (and is tested) without it.

Everything a generator needs travels in the calls: the plan as JSON, and the feeder files'
bytes (the nodes need not share a file system).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import resource
import socket
import tempfile
import time
from pathlib import Path
from functools import lru_cache
from typing import Any

from horde import __version__
from horde.engine.run import start_handle
from horde.engine.target import start as start_target
from horde.engine.snapshot import Snapshot


#: Calibration: VUs on the plain GET, and the share of the measured capacity a generator is
#: sized for. A plan's requests cost more than the calibration's bare GET (templates, checks,
#: larger bodies: the game scenario costs about 25 % more), and a generator driven past about
#: three quarters of its CPU starts to fire its timers late; half leaves room for both.
CALIBRATION_VUS = 32
CALIBRATION_HEADROOM = 0.5
#: The engine's worker threads are named ``horde-worker-N`` (the built-in target's are not).
WORKER_THREAD_PREFIX = "horde-worker-"


@lru_cache(maxsize=1)
def engine_build() -> str:
    """The engine this process loads, told apart from any other build: the first 16 hex digits
    of the sha256 of its extension's file (``horde/_engine.abi3.so``). Nodes that installed the
    same wheel load the same bytes; two builds of the same version do not, and their engines may
    count differently, so a cluster run compares this as well as the version."""
    spec = importlib.util.find_spec("horde._engine")
    if spec is None or spec.origin is None:
        return "unknown"
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()[:16]


class Generator:
    """One engine process running its share of a plan."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._handle: Any = None
        self._files = tempfile.TemporaryDirectory(prefix=f"horde-generator-{index}-")

    def describe(self) -> dict[str, Any]:
        """Where this generator runs and what it may use."""
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        return {
            "index": self.index,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "cpus": len(os.sched_getaffinity(0)),
            "open_files": 1 << 30 if hard == resource.RLIM_INFINITY else int(hard),
            "clock": time.time(),
            # The coordinator refuses a generator whose Horde is not its own (check_same_horde).
            "horde_version": __version__,
            "engine_build": engine_build(),
        }

    def clock(self) -> float:
        """This node's wall clock, for the coordinator's offset estimate."""
        return time.time()

    def calibrate(self, seconds: float = 3.0) -> dict[str, Any]:
        """Measures what one worker sends per CPU-second: a closed run of plain keep-alive GETs
        against a built-in target in this process, timing only the engine's worker thread (from
        ``/proc``; the target's threads do not count). Returns the figures and
        ``capacity_rps_per_worker``, the measured rate scaled by :data:`CALIBRATION_HEADROOM`."""
        target = start_target(threads=1)
        try:
            plan = {
                "version": 1,
                "name": "calibration",
                "target": {"base_url": f"http://127.0.0.1:{target.port}"},
                "graceful_stop_s": 1,
                "scenarios": [
                    {
                        "name": "calibration",
                        "steps": [{"name": "get", "method": "GET", "path": "/"}],
                        "workload": {
                            "type": "closed",
                            "start_vus": CALIBRATION_VUS,
                            "stages": [{"duration_s": seconds + 5, "vus": CALIBRATION_VUS}],
                        },
                    }
                ],
            }
            handle = start_handle(json.dumps(plan), 1)
            # Second 1 warms up (connections, caches); seconds 2.. are measured, the worker's CPU
            # read as each second's snapshot arrives.
            marks: list[tuple[int, float]] = []
            deadline = time.monotonic() + seconds + 10
            while not handle.finished and time.monotonic() < deadline:
                snapshot = handle.poll(0.2)
                if snapshot is None or snapshot["final"] or len(marks) > seconds:
                    continue
                requests = sum(int(step["requests"]) for step in snapshot["steps"])
                marks.append((requests, _worker_cpu_s()))
                if len(marks) > seconds:
                    handle.stop()  # the seconds after the stop are not measured
            while not handle.finished and time.monotonic() < deadline:
                handle.poll(0.2)
        finally:
            target.stop()
        if len(marks) < 2:
            raise RuntimeError("the calibration run gave too few seconds to measure")
        requests = sum(count for count, _ in marks[1:])
        cpu_s = marks[-1][1] - marks[0][1]
        if requests == 0 or cpu_s <= 0:
            raise RuntimeError(f"the calibration measured {requests} requests in {cpu_s:.3f} CPU seconds")
        per_cpu_second = requests / cpu_s
        return {
            "requests": requests,
            "cpu_s": cpu_s,
            "cpu_us_per_request": 1e6 * cpu_s / requests,
            "rps_per_cpu": per_cpu_second,
            "capacity_rps_per_worker": per_cpu_second * CALIBRATION_HEADROOM,
        }

    def start(
        self, plan_json: str, workers: int, first_slot: int, slots: int, start_at: float, feeders: dict[str, bytes]
    ) -> dict[str, Any]:
        """Starts this generator's share of the plan at ``start_at`` (this node's clock). The
        feeder files come as bytes, written here and put in the plan in place of their paths."""
        plan = json.loads(plan_json)
        local: dict[str, str] = {}
        for number, (path, content) in enumerate(sorted(feeders.items())):
            copy = Path(self._files.name) / f"{number}-{Path(path).name}"
            copy.write_bytes(content)
            local[path] = str(copy)
        for scenario in plan.get("scenarios", []):
            for feeder in scenario.get("feeders", []) or []:
                feeder["path"] = local.get(feeder["path"], feeder["path"])
        self._handle = start_handle(json.dumps(plan), workers, first_slot=first_slot, slots=slots, start_at=start_at)
        return {"pid": os.getpid(), "planned_duration_s": float(self._handle.planned_duration_s)}

    def poll(self) -> list[Snapshot]:
        """Every snapshot ready now (none when the run has not reached its next second)."""
        ready: list[Snapshot] = []
        if self._handle is None:
            return ready
        while not self._handle.finished:
            snapshot = self._handle.poll(0.0)
            if snapshot is None:
                break
            ready.append(snapshot)
        return ready

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.stop()

    def retarget(self, scenario: int, level: float, ramp_s: float) -> None:
        """Moves a scenario to the plan's new total level: the engine takes its own share."""
        if self._handle is not None:
            self._handle.retarget(scenario, level, ramp_s)

    def repace(self, scenario: int, factor: float) -> None:
        """Sets a scenario's pace factor on this generator's VUs (every generator gets the same
        one)."""
        if self._handle is not None:
            self._handle.repace(scenario, factor)


def _worker_cpu_s() -> float:
    """CPU seconds used so far by this process's engine worker threads."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith(WORKER_THREAD_PREFIX):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        total += int(fields[11]) + int(fields[12])  # utime and stime (fields 14 and 15 of stat)
    return total / ticks
