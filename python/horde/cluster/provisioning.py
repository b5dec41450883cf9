"""How many generators a plan needs, and where they go: arithmetic only, no cluster.

A generator is one engine process (a Ray actor) with its own worker threads. Its share of the
plan follows its workers: the run's slots are all generators' workers laid end to end, and VU
or arrival ``i`` belongs to slot ``i mod slots`` (``GeneratorShare`` in the engine). So a
generator with ``w`` of the ``S`` slots holds ``w / S`` of the VUs, of their connections and of
the rate, and the sizing checks each generator's own share against its own limits:

- **connections**: one per VU at its peak (``target.connections: per_vu``), or the pool's size
  per generator; each generator may open at most its hard ``RLIMIT_NOFILE`` files, less
  :data:`RESERVED_FILES` for itself (20,000 on the machines Horde was first sized on);
- **rate**: the plan's peak requests per second (an open model's highest rate, or
  ``generators.expected_rps`` for closed ones) against each generator's capacity, given in the
  plan or measured by a calibration;
- **memory**: the VUs' estimated resident memory against the node's.

Placement puts one generator on each node first (the nodes with the most CPUs first), then
each further one on the node with the most CPUs still free; a generator's workers are its
node's CPUs shared among the generators placed there.

>>> nodes = [Node("a", "10.0.0.1", cpus=16, memory_bytes=64 << 30), Node("b", "10.0.0.2", cpus=8, memory_bytes=32 << 30)]
>>> provision(Demand(peak_vus=30_000, pool_size=None, peak_rps=None), nodes, Limits(open_files=20_000)).count
3
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from horde.plan import Plan
from horde.plan.target import ConnectionPool
from horde.plan.workloads import OpenModel, peak_vus

#: Files a generator keeps for itself besides its connections (as ``horde.engine.run.RESERVED_FILES``).
RESERVED_FILES = 64
#: Resident memory one VU is budgeted when checking a node's memory (the engine measures about
#: 7 KiB per VU with its connection; the budget leaves room for scenario variables and cookies).
MEMORY_PER_VU_BYTES = 16 * 1024
#: The most generators provisioning will ever propose.
MAX_GENERATORS = 10_000


@dataclass(frozen=True)
class Node:
    """A machine of the cluster, as the cluster reports it."""

    node_id: str
    address: str
    cpus: float
    memory_bytes: int


@dataclass(frozen=True)
class Demand:
    """What the plan asks at its peak, over all generators."""

    peak_vus: int
    #: Connections per generator when the plan shares a pool; None: one per VU.
    pool_size: int | None
    #: Requests per second at the peak, when known.
    peak_rps: float | None


@dataclass(frozen=True)
class Limits:
    """What one generator may do."""

    open_files: int
    #: Requests per second one generator can send, whatever its workers (given in the plan).
    capacity_rps: float | None = None
    #: Requests per second one worker can send (measured by calibration); a generator's
    #: capacity is this times its workers. With neither capacity known the rate is not checked.
    capacity_rps_per_worker: float | None = None
    memory_per_vu_bytes: int = MEMORY_PER_VU_BYTES


@dataclass(frozen=True)
class Placement:
    """One generator: where it runs, how many workers it has, and the slots they hold."""

    index: int
    node_id: str
    address: str
    workers: int
    first_slot: int


@dataclass
class Provision:
    """The generators chosen and why."""

    count: int
    placements: list[Placement]
    slots: int
    #: One line per constraint: what it asks and how many generators that takes.
    reasons: list[str] = field(default_factory=list)

    def share(self, placement: Placement) -> float:
        """The part of the plan's load that generator carries."""
        return placement.workers / self.slots

    def describe(self) -> str:
        by_node: dict[str, list[Placement]] = {}
        for placement in self.placements:
            by_node.setdefault(placement.address, []).append(placement)
        spread = ", ".join(
            f"{address}: {len(placed)} × {placed[0].workers} worker{'s' if placed[0].workers != 1 else ''}"
            if len({p.workers for p in placed}) == 1
            else f"{address}: {len(placed)} ({'+'.join(str(p.workers) for p in placed)} workers)"
            for address, placed in by_node.items()
        )
        return f"{self.count} generator{'s' if self.count != 1 else ''} ({spread}); " + "; ".join(self.reasons)


def demand_of(plan: Plan) -> Demand:
    """The plan's peak VUs, its pool (if any) and its peak rate, when known."""
    vus = sum(peak_vus(scenario.workload) for scenario in plan.scenarios)
    connections = plan.target.connections
    pool_size = connections.pool if isinstance(connections, ConnectionPool) else None
    open_rates = [
        _peak_rate(scenario.workload) for scenario in plan.scenarios if isinstance(scenario.workload, OpenModel)
    ]
    closed = any(not isinstance(scenario.workload, OpenModel) for scenario in plan.scenarios)
    expected = plan.generators.expected_rps if plan.generators is not None else None
    if expected is not None:
        peak_rps: float | None = expected
    elif closed:
        peak_rps = None  # a closed model's rate is known only once it runs
    else:
        peak_rps = sum(open_rates)
    return Demand(peak_vus=vus, pool_size=pool_size, peak_rps=peak_rps)


def _peak_rate(workload: OpenModel) -> float:
    return max([workload.start_rate_per_s, *(stage.rate_per_s for stage in workload.stages)])


def place(
    count: int, nodes: list[Node], *, workers: int | None = None, max_workers: int | None = None
) -> list[Placement]:
    """Puts ``count`` generators on ``nodes``: one per node first (most CPUs first), then each on
    the node with the most CPUs left per generator. Workers: ``workers`` when given, else the
    node's CPUs shared among its generators (at least one); never more than ``max_workers``
    (a pool of N connections feeds at most N workers)."""
    if not nodes:
        raise ValueError("no nodes to place generators on")
    ordered = sorted(nodes, key=lambda node: (-node.cpus, node.address, node.node_id))
    on_node = [0] * len(ordered)
    order: list[int] = []
    for number in range(count):
        if number < len(ordered):
            best = number  # the first round: one per node, largest first
        else:
            # Then free CPUs: a node's CPUs less one per generator already there; ties go to
            # the node with fewer generators, then to the earlier (larger) node.
            best = max(range(len(ordered)), key=lambda i: (ordered[i].cpus - on_node[i], -on_node[i], -i))
        on_node[best] += 1
        order.append(best)
    placements = []
    first_slot = 0
    for index, node_index in enumerate(order):
        node = ordered[node_index]
        own = workers if workers is not None else max(1, int(node.cpus // on_node[node_index]))
        if max_workers is not None:
            own = max(1, min(own, max_workers))
        placements.append(
            Placement(index=index, node_id=node.node_id, address=node.address, workers=own, first_slot=first_slot)
        )
        first_slot += own
    return placements


def provision(
    demand: Demand, nodes: list[Node], limits: Limits, *, count: int | None = None, workers: int | None = None
) -> Provision:
    """The generators for ``demand`` on ``nodes``: ``count`` when given, else the fewest that keep
    every generator's share within ``limits`` (connections, rate, memory).

    Raises ``ValueError`` when no count up to :data:`MAX_GENERATORS` fits (say which limit)."""
    usable_files = limits.open_files - RESERVED_FILES
    if usable_files < 1:
        raise ValueError(f"a generator may open only {limits.open_files} files ({RESERVED_FILES} kept for itself)")
    if demand.pool_size is not None and demand.pool_size > usable_files:
        raise ValueError(
            f"the pool of {demand.pool_size:,} connections per generator exceeds one generator's "
            f"{usable_files:,} usable files"
        )
    if count is not None:
        placements = place(count, nodes, workers=workers, max_workers=demand.pool_size)
        result = _provision_of(placements, demand, limits)
        result.reasons.insert(0, f"{count} asked")
        return result
    # The fewest generators whose largest share fits. Shares follow workers, so the check runs
    # on each candidate placement rather than on an even split.
    low = _lower_bound(demand, limits, usable_files)
    # Past one generator per CPU, more generators only split the same workers further.
    high = max(low, min(MAX_GENERATORS, int(sum(max(1.0, node.cpus) for node in nodes))))
    for candidate in range(low, high + 1):
        placements = place(candidate, nodes, workers=workers, max_workers=demand.pool_size)
        result = _provision_of(placements, demand, limits)
        if not _overloaded(result, demand, limits, usable_files):
            return result
    raise ValueError(
        f"even {high:,} generators on these {len(nodes)} nodes cannot carry {demand.peak_vus:,} VUs"
        + (f" at {demand.peak_rps:,.0f} req/s" if demand.peak_rps else "")
    )


def _lower_bound(demand: Demand, limits: Limits, usable_files: int) -> int:
    """A count no smaller than the answer, from even shares (the search starts here)."""
    needed = 1
    if demand.pool_size is None:
        needed = max(needed, math.ceil(demand.peak_vus / usable_files))
    if demand.peak_rps and limits.capacity_rps:
        needed = max(needed, math.ceil(demand.peak_rps / limits.capacity_rps))
    return min(needed, MAX_GENERATORS)


def _provision_of(placements: list[Placement], demand: Demand, limits: Limits) -> Provision:
    slots = sum(placement.workers for placement in placements)
    result = Provision(count=len(placements), placements=placements, slots=slots)
    largest = max(placement.workers for placement in placements) / slots
    if demand.pool_size is None:
        result.reasons.append(
            f"connections: {demand.peak_vus:,} (one per VU), at most {math.ceil(demand.peak_vus * largest):,} on one "
            f"generator of {limits.open_files - RESERVED_FILES:,} usable files"
        )
    else:
        result.reasons.append(f"connections: a pool of {demand.pool_size:,} per generator")
    if demand.peak_rps is None:
        result.reasons.append("rate: not known before the run (closed model; generators.expected_rps sizes it)")
    elif limits.capacity_rps is None and limits.capacity_rps_per_worker is not None:
        result.reasons.append(
            f"rate: {demand.peak_rps:,.0f} req/s over {slots} workers of "
            f"{limits.capacity_rps_per_worker:,.0f} req/s measured capacity each"
        )
    elif limits.capacity_rps is None:
        result.reasons.append(f"rate: {demand.peak_rps:,.0f} req/s, generator capacity not known")
    else:
        result.reasons.append(
            f"rate: {demand.peak_rps:,.0f} req/s, at most {demand.peak_rps * largest:,.0f} on one "
            f"generator of {limits.capacity_rps:,.0f} req/s capacity"
        )
    return result


def _overloaded(result: Provision, demand: Demand, limits: Limits, usable_files: int) -> bool:
    """Whether some generator's share exceeds its files or its capacity. Memory is per node:
    more generators on the same nodes would not help, so it is warned about (check_memory)
    rather than searched for."""
    for placement in result.placements:
        share = result.share(placement)
        if demand.pool_size is None and math.ceil(demand.peak_vus * share) > usable_files:
            return True
        if demand.peak_rps and limits.capacity_rps and demand.peak_rps * share > limits.capacity_rps:
            return True
        per_worker = limits.capacity_rps_per_worker
        if demand.peak_rps and per_worker and demand.peak_rps * share > per_worker * placement.workers:
            return True
    return False


def check_memory(result: Provision, demand: Demand, nodes: list[Node], limits: Limits) -> list[str]:
    """Nodes whose generators' VUs would need more memory than the node has, as warnings."""
    memory_of = {node.node_id: (node.address, node.memory_bytes) for node in nodes}
    vus_on_node: dict[str, float] = {}
    for placement in result.placements:
        vus_on_node[placement.node_id] = vus_on_node.get(placement.node_id, 0.0) + demand.peak_vus * result.share(
            placement
        )
    warnings = []
    for node_id, vus in vus_on_node.items():
        address, memory = memory_of[node_id]
        needed = vus * limits.memory_per_vu_bytes
        if needed > memory:
            warnings.append(
                f"node {address}: {vus:,.0f} VUs may need {needed / 2**30:.1f} GiB of its {memory / 2**30:.1f} GiB"
            )
    return warnings
