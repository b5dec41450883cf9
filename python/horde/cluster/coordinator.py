"""A run over several generators on a Ray cluster, seen by the conductor as one run.

:class:`ClusterRun` has the same surface as :class:`horde.engine.run.Run` (``poll``, ``stop``,
``set_level``, ``set_pace``, ``finished``, ``close``), so thresholds, autostop, steering, the
store and the dashboard work on the merged run unchanged. What it does underneath:

1. **Connect** to the cluster (``ray.init``), with Ray's usage statistics off.
2. **Provision**: one probe generator per node describes its node (CPUs, open-file limit) and,
   when the plan gives no capacity and the rate is known, calibrates; the arithmetic in
   :mod:`horde.cluster.provisioning` then says how many generators and where.
3. **Start together**: each generator's clock offset is estimated (the fastest of a few round
   trips), an instant is agreed a little ahead, and each generator's engine starts at that
   instant on its own clock. Each generator's skew (its time zero, from its first snapshot,
   brought to our clock by its offset, against the agreed instant) is reported with its
   uncertainty, half the round trip the offset was measured over: a generator that started
   late (the instant had passed when its start call arrived) shows here, and so would an
   offset that moved.
4. **Merge**: each second, every generator's snapshot of it is pulled and merged exactly
   (:mod:`horde.cluster.merge`); a second is handed on once every generator still counted
   has delivered it.
5. **Lost generators**: each generator's second ``s`` is due at an absolute instant, the
   agreed start + ``s`` + :data:`DEADLINE_MARGIN_S`. One missed deadline makes it *suspect*,
   a second one *lost*; an "actor died" or "actor unavailable" error makes it lost at once.
   The merge goes on without it (or the run stops, as ``generators.on_lost`` says); its share
   and the second it went missing are recorded in every later second and in the report.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from horde.cluster.generator import Generator, engine_build
from horde.cluster.merge import generator_row
from horde.engine.snapshot import Snapshot, merge_seconds
from horde.cluster.provisioning import Limits, Node, Placement, Provision, check_memory, demand_of, provision
from horde import __version__
from horde.errors import ClusterUnavailable, InvalidInput
from horde.plan import Plan
from horde.engine.run import POLL_INTERVAL_S, load_levels, paced_scenarios
from horde.results.summary_blocks import ClusterBlock

#: A generator's second ``s`` is due this long after the agreed start + ``s``: the engine hands
#: a second over a few milliseconds after it ends, the pull takes a round trip, and a generator
#: under full load may be a little late.
DEADLINE_MARGIN_S = 1.0
#: How often a generator is asked for its new snapshots.
PULL_PERIOD_S = 0.1
#: How far ahead the start instant is agreed, at least (plus a few round trips).
START_LEAD_S = 1.5
#: Round trips taken to estimate each generator's clock offset (the fastest one counts).
CLOCK_SAMPLES = 5
#: How long the first TCP connection to the head may take.
CONNECT_TIMEOUT_S = 5.0
#: How long set-up calls (describe, calibrate, start) may take.
SETUP_TIMEOUT_S = 60.0

#: Set wherever Horde starts or joins a cluster: Ray otherwise reports usage to an outside server.
RAY_ENVIRONMENT = {"RAY_USAGE_STATS_ENABLED": "0"}
#: ``--cluster local``: a Ray cluster of this machine alone, started for the run.
LOCAL = "local"
#: The local cluster's object store: generators pass only snapshots and feeder files through it.
LOCAL_OBJECT_STORE_BYTES = 128 << 20
#: Health checks for the clusters Horde starts: Ray's defaults notice a killed node after about
#: 13 s and a hung one after about 65 s; these, after about 3 s. (Horde's own per-second
#: deadlines find a lost generator first either way.)
HEALTH_CHECKS = {
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 1000,
}


@dataclass
class ClusterOptions:
    """How to reach the cluster and how many generators to use."""

    address: str
    #: Generators asked for (``--generators``); None: the plan's count, else provisioning's.
    count: int | None = None
    #: Worker threads per generator; None: the plan's, else the node's CPUs shared.
    workers: int | None = None


@dataclass
class _Generator:
    """The coordinator's view of one generator."""

    placement: Placement
    actor: Any
    share: float
    offset_s: float = 0.0
    rtt_s: float = 0.0
    pid: int | None = None
    state: str = "running"  # running, suspect, lost, finished
    final_second: int | None = None
    lost_at_second: int | None = None
    lost_reason: str | None = None
    skew_ms: float | None = None
    pending: Any = None  # the outstanding pull
    last_pull: float = 0.0
    received: dict[int, Snapshot] = field(default_factory=dict)


def import_ray(address: str) -> Any:
    """Ray, imported with usage statistics off; a loopback address is used as given.

    Ray turns 127.0.0.1 in an address into the machine's "public" address (found by probing a
    route), where a cluster started on loopback does not listen; telling Ray it runs without
    multi-host networking keeps the loopback address as it is. Only for loopback clusters, and
    only in this process.
    """
    os.environ.update(RAY_ENVIRONMENT)
    if _is_loopback(address):
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    try:
        import ray
    except ImportError:
        # The cluster cannot be reached from here (exit 6, as the README says), not a bad flag:
        # the same command works once Ray is installed.
        raise ClusterUnavailable(
            "running on a cluster needs Ray, which is not installed", hint="pip install 'horde[cluster]'"
        ) from None
    if _is_loopback(address):
        # Already imported (by a test that started the cluster): the flag was read at import.
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


def _host_of(address: str) -> str:
    address = address.removeprefix("ray://")
    return address.rsplit(":", 1)[0].strip("[]") if ":" in address else address


def _is_loopback(address: str) -> bool:
    host = _host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_reachable(address: str) -> None:
    """Fails fast when nothing listens at the head's address (Ray itself retries for minutes)."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidInput(
            f"--cluster {address}: not HOST:PORT",
            hint="the head node's address, e.g. 10.0.0.1:6379 or ray://10.0.0.1:10001, or auto",
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise ClusterUnavailable(
            f"cannot join the Ray cluster at {address}: {error.strerror or error}",
            hint="start it with `ray start --head` (see docs/cluster.md) and give the head's "
            "HOST:PORT, or ray://HOST:10001 for Ray Client",
        ) from None


def check_same_horde(described: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuses a cluster whose generators do not all run this Horde: the same version and the
    same engine build (:func:`horde.cluster.generator.engine_build`), read from each node's
    ``describe`` (keyed by how the node is named in messages). Another version's engine may
    count, merge or time differently, and the run would mix them silently; nothing is sent.
    Raises :class:`ClusterUnavailable` (exit code 6) naming each node that differs.

    >>> here = {"horde_version": __version__, "engine_build": engine_build()}
    >>> check_same_horde({"10.0.0.2": here})
    >>> check_same_horde({"10.0.0.2": {**here, "horde_version": "0.0.9"}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    horde.errors.ClusterUnavailable: 1 node does not run this Horde (...): 10.0.0.2 runs horde 0.0.9 ...
    """
    here = (__version__, engine_build())
    differing = []
    for node, description in described.items():
        # A node whose Horde predates this check says neither.
        theirs = (str(description.get("horde_version") or "unknown"), str(description.get("engine_build") or "unknown"))
        if theirs != here:
            differing.append(f"{node} runs horde {theirs[0]} (engine build {theirs[1]})")
    if differing:
        count = f"{len(differing)} node{'s' if len(differing) > 1 else ''} {'do' if len(differing) > 1 else 'does'}"
        raise ClusterUnavailable(
            f"{count} not run this Horde (horde {here[0]}, engine build {here[1]}): " + "; ".join(differing),
            hint="install the same wheel on every node and on this machine (`make wheel`, then "
            "`pip install --force-reinstall horde-*.whl`; docs/cluster.md, \"The same Horde on every node\")",
        )


def resolve_address(address: str) -> str:
    """``auto`` is ``$RAY_ADDRESS``; ``local`` starts a cluster of this machine; anything else is
    used as given (``host:port`` of the head's GCS, or ``ray://host:port`` for Ray Client)."""
    if address != "auto":
        return address
    found = os.environ.get("RAY_ADDRESS")
    if not found:
        raise InvalidInput(
            "--cluster auto: RAY_ADDRESS is not set",
            hint="set RAY_ADDRESS=HOST:PORT (the head node's address) or give --cluster HOST:PORT",
        )
    return found


class ClusterRun:
    """One plan over several generators; see the module's description."""

    def __init__(
        self,
        ray: Any,
        plan: Plan,
        plan_json: str,
        provisioned: Provision,
        generators: list[_Generator],
        start_s: float,
        planned_duration_s: float,
        report: ClusterBlock,
    ) -> None:
        self._ray = ray
        self.plan = plan
        self.plan_json = plan_json
        self.provision = provisioned
        self.generators = generators
        self.start_s = start_s
        self._planned_duration_s = planned_duration_s
        self._report = report
        self.stop_requested = False
        self._finished = False
        self._next_second = 1
        self._ready: list[Snapshot] = []
        self.notes: list[str] = []
        self.stopped_for_loss = False
        #: A local cluster's temp directory, removed at close.
        self._temp_dir: str | None = None

    # --- the Run surface ------------------------------------------------------------------

    @classmethod
    def start(cls, plan: Plan, plan_json: str, options: ClusterOptions) -> ClusterRun:
        """Connects, provisions and starts the generators; returns once all have started."""
        address = resolve_address(options.address)
        temp_dir: str | None = None
        if address == LOCAL:
            # A cluster of this machine alone, started here and ended with the run: several
            # generator processes, past one process's open-file and core limits.
            ray = import_ray("127.0.0.1")
            # Its own temp directory (sockets, logs), removed when the run ends: never another
            # cluster's, and short (socket paths are limited to about 100 bytes).
            temp_dir = tempfile.mkdtemp(prefix="horde-ray-")
            settings: dict[str, Any] = {
                "address": "local",
                "num_cpus": os.cpu_count() or 1,
                "include_dashboard": False,
                "_node_ip_address": "127.0.0.1",
                "object_store_memory": LOCAL_OBJECT_STORE_BYTES,
                "_system_config": HEALTH_CHECKS,
                "_temp_dir": temp_dir,
            }
            failure = (
                "cannot start a local Ray cluster",
                "check /tmp has space and that `ray start --head` works here",
            )
        else:
            _check_reachable(address)
            ray = import_ray(address)
            settings = {
                "address": address,
                **({"_node_ip_address": _host_of(address)} if _is_loopback(address) else {}),
            }
            failure = (
                f"cannot join the Ray cluster at {address}",
                "start it with `ray start --head` (see docs/cluster.md) and give the head's HOST:PORT, "
                "or ray://HOST:10001 for Ray Client",
            )
        try:
            try:
                ray.init(namespace="horde", log_to_driver=False, logging_level="ERROR", **settings)
            except Exception as error:  # Ray raises ConnectionError, TimeoutError, RuntimeError...
                raise ClusterUnavailable(f"{failure[0]}: {error}", hint=failure[1]) from None
            run = cls._start_on(ray, plan, plan_json, options)
        except BaseException:
            ray.shutdown()  # nothing to do when init failed
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            raise
        run._temp_dir = temp_dir
        return run

    @classmethod
    def _start_on(cls, ray: Any, plan: Plan, plan_json: str, options: ClusterOptions) -> ClusterRun:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        settings = plan.generators
        nodes = [
            Node(
                node_id=entry["NodeID"],
                address=entry["NodeManagerAddress"],
                cpus=float(entry["Resources"].get("CPU", 0)),
                memory_bytes=int(entry["Resources"].get("memory", 0)),
            )
            for entry in ray.nodes()
            if entry.get("Alive") and entry["Resources"].get("CPU", 0) > 0
        ]
        if not nodes:
            raise ClusterUnavailable(
                "the cluster has no live node with CPUs to run generators on",
                hint="join nodes with `ray start --address=HEAD:PORT --num-cpus=N`",
            )
        remote = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1)(Generator)

        def actor_on(node_id: str, index: int) -> Any:
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            return remote.options(scheduling_strategy=strategy, name=None).remote(index)

        def get(refs: Any, what: str) -> Any:
            try:
                return ray.get(refs, timeout=SETUP_TIMEOUT_S)
            except Exception as error:
                raise ClusterUnavailable(
                    f"the generators could not {what}: {type(error).__name__}: {error}",
                    hint="check that every node has Horde installed (the same version as here)",
                ) from None

        probes = {node.node_id: actor_on(node.node_id, -1) for node in nodes}
        described = dict(
            zip(probes, get([probe.describe.remote() for probe in probes.values()], "describe their nodes"))
        )
        check_same_horde({f"{node.address} ({node.node_id[:8]})": described[node.node_id] for node in nodes})
        demand = demand_of(plan)
        calibration: dict[str, Any] | None = None
        capacity_rps = settings.capacity_rps if settings is not None else None
        per_worker: float | None = None
        if capacity_rps is None and demand.peak_rps is not None:
            measured = dict(zip(probes, get([probe.calibrate.remote() for probe in probes.values()], "calibrate")))
            per_worker = min(figures["capacity_rps_per_worker"] for figures in measured.values())
            address_of = {node.node_id: node.address for node in nodes}
            calibration = {f"{address_of[node_id]} ({node_id[:8]})": figures for node_id, figures in measured.items()}
        limits = Limits(
            open_files=min(int(info["open_files"]) for info in described.values()),
            capacity_rps=capacity_rps,
            capacity_rps_per_worker=per_worker,
        )
        count = options.count or (settings.count if settings is not None else None)
        workers = options.workers or (settings.workers if settings is not None else None)
        try:
            provisioned = provision(demand, nodes, limits, count=count, workers=workers)
        except ValueError as error:
            raise ClusterUnavailable(
                f"cannot size the generators: {error}",
                hint="add nodes, use a connection pool (target.connections), or lower the load",
            ) from None
        generators: list[_Generator] = []
        unused = dict(probes)
        for placement in provisioned.placements:
            actor = unused.pop(placement.node_id, None) or actor_on(placement.node_id, placement.index)
            generators.append(_Generator(placement=placement, actor=actor, share=provisioned.share(placement)))
        for probe in unused.values():
            ray.kill(probe)
        for generator in generators:
            _measure_clock(ray, generator)
        feeders = _feeder_files(plan_json)
        feeders_ref = ray.put(feeders)
        lead = START_LEAD_S + 4 * max(generator.rtt_s for generator in generators)
        start_s = time.time() + lead
        started = get(
            [
                generator.actor.start.remote(
                    plan_json,
                    generator.placement.workers,
                    generator.placement.first_slot,
                    provisioned.slots,
                    start_s + generator.offset_s,
                    feeders_ref,
                )
                for generator in generators
            ],
            "start their engines",
        )
        for generator, answer in zip(generators, started):
            generator.pid = int(answer["pid"])
        report: ClusterBlock = {
            "provision": provisioned.describe(),
            "slots": provisioned.slots,
            "memory_warnings": check_memory(provisioned, demand, nodes, limits),
            "calibration": calibration,
            "capacity_rps_per_worker": per_worker,
            "agreed_start": start_s,
        }
        planned = float(started[0]["planned_duration_s"])
        return cls(ray, plan, plan_json, provisioned, generators, start_s, planned, report)

    @property
    def planned_duration_s(self) -> float:
        return self._planned_duration_s

    @property
    def finished(self) -> bool:
        return self._finished and not self._ready

    def poll(self, timeout_s: float = POLL_INTERVAL_S) -> Snapshot | None:
        """The next merged second, or None if none is complete within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._ready:
                return self._ready.pop(0)
            if self._finished:
                return None
            self._pull(max(0.0, min(PULL_PERIOD_S, deadline - time.monotonic())))
            self._check_deadlines()
            self._merge_complete_seconds()
            if not self._ready and time.monotonic() >= deadline:
                return None

    def stop(self) -> None:
        """Stops every generator still running: no new iterations, in-flight ones drain."""
        self.stop_requested = True
        for generator in self._live():
            try:
                generator.actor.stop.remote()
            except Exception:  # a generator gone meanwhile is found lost by its deadline
                pass

    def set_level(
        self,
        *,
        vus: int | None = None,
        rate_per_s: float | None = None,
        scenarios: list[str] | None = None,
        ramp_s: float = 0.0,
    ) -> dict[str, float]:
        """As :meth:`horde.engine.run.Run.set_level`: every generator gets the new total level and takes
        its own share of it, so the sum stays exact."""
        chosen = load_levels(self.plan, vus=vus, rate_per_s=rate_per_s, scenarios=scenarios)
        calls = [
            generator.actor.retarget.remote(index, level, max(0.0, float(ramp_s)))
            for generator in self._live()
            for index, _, level in chosen
        ]
        try:
            self._ray.get(calls, timeout=5.0)
        except ValueError as error:  # Ray re-raises a generator's ValueError as one (out of range)
            raise InvalidInput(str(error).splitlines()[-1]) from None
        except Exception:
            pass  # a generator lost meanwhile: its deadline records it; the others moved
        return {name: level for _, name, level in chosen}

    def set_pace(self, factor: float, *, scenarios: list[str] | None = None) -> dict[str, float]:
        """As :meth:`horde.engine.run.Run.set_pace`: every generator gets the same factor, so
        every share of the VUs goes at the same pace and the total moves by ``factor``."""
        chosen = paced_scenarios(self.plan, scenarios)
        factor = float(factor)
        calls = [generator.actor.repace.remote(index, factor) for generator in self._live() for index, _ in chosen]
        try:
            self._ray.get(calls, timeout=5.0)
        except ValueError as error:  # Ray re-raises a generator's ValueError as one (bad factor)
            raise InvalidInput(str(error).splitlines()[-1]) from None
        except Exception:
            pass  # a generator lost meanwhile: its deadline records it; the others moved
        return {name: factor for _, name in chosen}

    def close(self) -> None:
        """Ends every generator actor and leaves the cluster."""
        for generator in self.generators:
            try:
                self._ray.kill(generator.actor)
            except Exception:
                pass
        self._ray.shutdown()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    # --- what the run reports ---------------------------------------------------------------

    def spread_block(self) -> ClusterBlock:
        """The ``cluster`` block of the summary: provisioning, each generator, skew and losses."""
        skews = [abs(generator.skew_ms) for generator in self.generators if generator.skew_ms is not None]
        lost = [generator for generator in self.generators if generator.state == "lost"]
        return {
            **self._report,
            "generators": [
                {
                    "generator": generator.placement.index,
                    "node": generator.placement.address,
                    "pid": generator.pid,
                    "workers": generator.placement.workers,
                    "first_slot": generator.placement.first_slot,
                    "share": generator.share,
                    "clock_offset_ms": generator.offset_s * 1000,
                    "round_trip_ms": generator.rtt_s * 1000,
                    "start_skew_ms": generator.skew_ms,
                    "skew_uncertainty_ms": generator.rtt_s * 500,
                    "state": generator.state,
                    "lost_at_second": generator.lost_at_second,
                    "lost_reason": generator.lost_reason,
                }
                for generator in self.generators
            ],
            "max_start_skew_ms": max(skews) if skews else None,
            "lost": [
                {
                    "generator": generator.placement.index,
                    "node": generator.placement.address,
                    "second": generator.lost_at_second,
                    "share": generator.share,
                    "reason": generator.lost_reason,
                }
                for generator in lost
            ],
            "lost_share": sum(generator.share for generator in lost),
            "stopped_for_loss": self.stopped_for_loss,
        }

    # --- underneath -------------------------------------------------------------------------

    def _live(self) -> list[_Generator]:
        return [generator for generator in self.generators if generator.state in ("running", "suspect")]

    def _pull(self, wait_s: float) -> None:
        """Asks each live generator for its new snapshots (one request outstanding each), and
        takes what came back within ``wait_s``."""
        now = time.monotonic()
        for generator in self._live():
            if generator.pending is None and now - generator.last_pull >= PULL_PERIOD_S:
                generator.pending = generator.actor.poll.remote()
                generator.last_pull = now
        pending = {generator.pending: generator for generator in self._live() if generator.pending is not None}
        if not pending:
            time.sleep(wait_s)
            return
        done, _ = self._ray.wait(list(pending), num_returns=len(pending), timeout=wait_s)
        for ref in done:
            generator = pending[ref]
            generator.pending = None
            try:
                snapshots = self._ray.get(ref)
            except Exception as error:
                self._lose(
                    generator, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".strip()
                )
                continue
            for snapshot in snapshots:
                self._receive(generator, snapshot)

    def _receive(self, generator: _Generator, snapshot: Snapshot) -> None:
        second = int(snapshot["second"])
        if generator.skew_ms is None:
            # Time zero on the generator's clock, brought to ours, against the agreed instant.
            zero = float(snapshot["timestamp"]) - float(snapshot["elapsed_s"]) - generator.offset_s
            generator.skew_ms = (zero - self.start_s) * 1000
        snapshot["timestamp"] = float(snapshot["timestamp"]) - generator.offset_s
        generator.received[second] = snapshot
        if generator.state == "suspect":
            generator.state = "running"
        if snapshot["final"]:
            generator.final_second = second
            generator.state = "finished"

    def _check_deadlines(self) -> None:
        """One missed deadline: suspect; a second one: lost."""
        now = time.time()
        for generator in self._live():
            second = self._next_second
            while second in generator.received:
                second += 1
            due = self.start_s + second + DEADLINE_MARGIN_S
            if now > due + 1.0:
                self._lose(generator, f"missed the deadlines of seconds {second} and {second + 1}")
            elif now > due and generator.state == "running":
                generator.state = "suspect"
                self.notes.append(
                    f"generator {generator.placement.index} ({generator.placement.address}) is late "
                    f"with second {second}: suspect"
                )

    def _lose(self, generator: _Generator, reason: str) -> None:
        generator.state = "lost"
        generator.lost_at_second = self._next_second
        generator.lost_reason = reason
        generator.pending = None
        try:
            self._ray.kill(generator.actor)  # a hung generator must not go on sending load
        except Exception:
            pass
        on_lost = self.plan.generators.on_lost if self.plan.generators is not None else "continue"
        self.notes.append(
            f"generator {generator.placement.index} ({generator.placement.address}) lost at second "
            f"{self._next_second}: {reason}; {generator.share:.0%} of the load is gone"
            + ("; stopping the run (generators.on_lost: stop)" if on_lost == "stop" else "; the others go on")
        )
        if on_lost == "stop" and not self.stop_requested:
            self.stopped_for_loss = True
            self.stop()

    def _merge_complete_seconds(self) -> None:
        """Hands on every second that every counted generator has delivered."""
        while True:
            second = self._next_second
            parts: list[tuple[_Generator, Snapshot]] = []
            for generator in self.generators:
                if generator.state == "lost" and second not in generator.received:
                    continue
                if generator.final_second is not None and second > generator.final_second:
                    continue
                if second not in generator.received:
                    return  # still due from this generator
                parts.append((generator, generator.received[second]))
            done = all(
                generator.state == "lost" or (generator.final_second is not None and generator.final_second <= second)
                for generator in self.generators
            )
            self._ready.append(self._merged(second, parts, final=done))
            for generator, _ in parts:
                del generator.received[second]
            self._next_second += 1
            if done:
                self._finished = True
                return

    def _merged(self, second: int, parts: list[tuple[_Generator, Snapshot]], *, final: bool) -> Snapshot:
        if parts:
            merged = merge_seconds([part for _, part in parts], final=final)
        else:  # every generator is lost: an empty last second closes the run
            merged = {
                "second": second,
                "elapsed_s": float(second),
                "interval_s": 1.0,
                "timestamp": self.start_s + second,
                "final": final,
                "steps": [],
                "target_vus": None,
                "target_rate_per_s": None,
                "cpu_percent": 0.0,
                "timer_lateness_p99_ms": 0.0,
                "timer_lateness_max_ms": 0.0,
                "run_delay_ms": 0.0,
                "steal_percent": 0.0,
                "active_vus": 0,
                "peak_vus": 0,
                "busy_vus": 0,
                "iterations": 0,
                "dropped_arrivals": 0,
                "connections_opened": 0,
            }
        by_generator = {id(generator): part for generator, part in parts}
        merged["generators"] = [
            generator_row(
                generator.placement.index,
                generator.placement.address,
                "lost" if generator.state == "lost" and id(generator) not in by_generator else generator.state,
                by_generator.get(id(generator)),
            )
            for generator in self.generators
        ]
        merged["lost_share"] = sum(
            generator.share
            for generator in self.generators
            if generator.state == "lost" and id(generator) not in by_generator
        )
        return merged


def _measure_clock(ray: Any, generator: _Generator) -> None:
    """The generator's clock offset from ours, from the fastest of a few round trips (its
    reading is taken as halfway through the trip)."""
    best: tuple[float, float] | None = None
    for _ in range(CLOCK_SAMPLES):
        sent = time.time()
        remote_clock = float(ray.get(generator.actor.clock.remote(), timeout=SETUP_TIMEOUT_S))
        came = time.time()
        sample = (came - sent, remote_clock - (sent + came) / 2)
        if best is None or sample[0] < best[0]:
            best = sample
    assert best is not None
    generator.rtt_s, generator.offset_s = best


def _feeder_files(plan_json: str) -> dict[str, bytes]:
    """Every feeder file the plan reads, by its path in the plan, with its bytes."""
    files: dict[str, bytes] = {}
    for scenario in json.loads(plan_json).get("scenarios", []):
        for feeder in scenario.get("feeders", []) or []:
            path = feeder["path"]
            if path not in files:
                try:
                    with open(path, "rb") as handle:
                        files[path] = handle.read()
                except OSError as error:
                    raise InvalidInput(f"feeder file {path}: {error.strerror}") from None
    return files


def worker_count(run: ClusterRun) -> int:
    """The most workers one generator has (the saturation limit is judged per generator)."""
    return max(generator.placement.workers for generator in run.generators)
