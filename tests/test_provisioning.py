"""Provisioning arithmetic on its own (no cluster): how many generators a plan needs and where
they go, checked on large plans (the game report's 150,000 VUs over 14 machines)."""

from __future__ import annotations

import math

import pytest

from horde.cluster.provisioning import (
    RESERVED_FILES,
    Demand,
    Limits,
    Node,
    check_memory,
    demand_of,
    place,
    provision,
)
from horde.plan import plan_from_dict

GIB = 1 << 30


def nodes_of(count: int, cpus: float = 32, memory_gib: int = 128) -> list[Node]:
    return [
        Node(f"id{index:02d}", f"10.0.0.{index + 1}", cpus=cpus, memory_bytes=memory_gib * GIB)
        for index in range(count)
    ]


def test_150k_vus_over_14_nodes_one_connection_each() -> None:
    nodes = nodes_of(14)
    result = provision(Demand(peak_vus=150_000, pool_size=None, peak_rps=20_000), nodes, Limits(open_files=20_000))
    usable = 20_000 - RESERVED_FILES
    assert result.count == math.ceil(150_000 / usable) == 8
    assert len({p.node_id for p in result.placements}) == 8, "one per node first"
    for placement in result.placements:
        assert 150_000 * result.share(placement) <= usable
    assert sum(result.share(p) for p in result.placements) == pytest.approx(1.0)
    # VUs by slot add up exactly: slot i holds the VUs numbered i, i + slots, ...
    assert sum(len(range(slot, 150_000, result.slots)) for slot in range(result.slots)) == 150_000
    assert "connections: 150,000 (one per VU)" in result.describe()


def test_the_rate_sizes_the_run_when_capacity_is_the_limit() -> None:
    nodes = nodes_of(14, cpus=4)
    limits = Limits(open_files=20_000, capacity_rps=3_000)
    result = provision(Demand(peak_vus=150_000, pool_size=1_000, peak_rps=20_000), nodes, limits)
    assert result.count == 7  # 20,000 / 3,000 rounded up; the pool keeps connections small
    assert max(20_000 * result.share(p) for p in result.placements) <= 3_000
    assert "a pool of 1,000 per generator" in result.describe()


def test_measured_capacity_is_per_worker() -> None:
    nodes = [
        Node("big", "10.0.0.1", cpus=8, memory_bytes=64 * GIB),
        Node("small", "10.0.0.2", cpus=2, memory_bytes=64 * GIB),
    ]
    result = provision(
        Demand(peak_vus=100, pool_size=None, peak_rps=9_000),
        nodes,
        Limits(open_files=20_000, capacity_rps_per_worker=1_000),
    )
    # 10 workers in all carry 10,000 req/s: both nodes are needed, each share follows its workers.
    assert result.count == 2 and result.slots == 10
    assert [p.workers for p in result.placements] == [8, 2]
    assert [result.share(p) for p in result.placements] == [0.8, 0.2]


def test_more_generators_than_nodes_go_where_cpus_are_free() -> None:
    nodes = [Node("a", "10.0.0.1", cpus=16, memory_bytes=GIB), Node("b", "10.0.0.2", cpus=4, memory_bytes=GIB)]
    placements = place(5, nodes)
    on = [p.node_id for p in placements]
    assert on[:2] == ["a", "b"], "one per node first, largest first"
    assert on.count("a") == 4 and on.count("b") == 1
    assert [p.workers for p in placements if p.node_id == "a"] == [4, 4, 4, 4]
    assert [p.first_slot for p in placements] == [0, 4, 8, 12, 16]


def test_a_given_count_and_workers_are_used() -> None:
    result = provision(
        Demand(peak_vus=10, pool_size=None, peak_rps=None), nodes_of(3), Limits(open_files=20_000), count=5, workers=2
    )
    assert result.count == 5 and result.slots == 10
    assert result.reasons[0] == "5 asked"
    assert "not known before the run" in result.describe()


def test_what_cannot_fit_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="pool of 30,000 connections"):
        provision(Demand(peak_vus=10, pool_size=30_000, peak_rps=None), nodes_of(2), Limits(open_files=20_000))
    with pytest.raises(ValueError, match="cannot carry"):
        provision(
            Demand(peak_vus=10, pool_size=None, peak_rps=1e6),
            nodes_of(2, cpus=2),
            Limits(open_files=20_000, capacity_rps_per_worker=100),
        )


def test_memory_is_warned_about_per_node() -> None:
    nodes = nodes_of(2, memory_gib=1)
    demand = Demand(peak_vus=150_000, pool_size=None, peak_rps=None)
    result = provision(demand, nodes, Limits(open_files=100_000))
    warnings = check_memory(result, demand, nodes, Limits(open_files=100_000))
    assert warnings and "may need" in warnings[0]


def test_the_demand_of_a_plan() -> None:
    plan = plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": "http://127.0.0.1:9"},
            "scenarios": [
                {
                    "name": "a",
                    "steps": [{"name": "g", "method": "GET", "path": "/"}],
                    "workload": {
                        "type": "open",
                        "start_rate_per_s": 10,
                        "max_vus": 300,
                        "stages": [{"duration_s": 5, "rate_per_s": 2_000}, {"duration_s": 5, "rate_per_s": 500}],
                    },
                },
                {
                    "name": "b",
                    "steps": [{"name": "g", "method": "GET", "path": "/"}],
                    "workload": {
                        "type": "open",
                        "start_rate_per_s": 100,
                        "max_vus": 200,
                        "stages": [{"duration_s": 5, "rate_per_s": 100}],
                    },
                },
            ],
        }
    )
    assert demand_of(plan) == Demand(peak_vus=500, pool_size=None, peak_rps=2_100)
    closed = plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": "http://127.0.0.1:9"},
            "generators": {"expected_rps": 20_000},
            "scenarios": [
                {
                    "name": "a",
                    "steps": [{"name": "g", "method": "GET", "path": "/"}],
                    "workload": {"type": "closed", "start_vus": 0, "stages": [{"duration_s": 5, "vus": 150_000}]},
                }
            ],
        }
    )
    assert demand_of(closed) == Demand(peak_vus=150_000, pool_size=None, peak_rps=20_000)


def test_a_pool_caps_the_workers_and_sizes_connections_per_generator() -> None:
    plan = plan_from_dict(
        {
            "version": 1,
            "target": {"base_url": "http://127.0.0.1:9", "connections": {"pool": 2}},
            "scenarios": [
                {
                    "name": "a",
                    "steps": [{"name": "g", "method": "GET", "path": "/"}],
                    "workload": {"type": "closed", "start_vus": 150_000, "stages": [{"duration_s": 5, "vus": 150_000}]},
                }
            ],
        }
    )
    demand = demand_of(plan)
    assert demand == Demand(peak_vus=150_000, pool_size=2, peak_rps=None)
    # 150,000 VUs on a pool need no more files than the pool: one generator, two workers at most.
    result = provision(demand, nodes_of(1, cpus=16), Limits(open_files=20_000))
    assert result.count == 1 and result.placements[0].workers == 2
