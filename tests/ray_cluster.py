"""A local multi-node Ray cluster for the scale-out tests.

Real GCS and raylets, all on 127.0.0.1 (given explicitly: Ray would otherwise probe for a
public address), each node with its own CPUs, memory and a resource naming it (without them
every node claims the whole machine), each cluster in its own temp directory, with tuned
health checks. Every path Ray writes goes under that directory: ``ray.cluster_utils.Cluster``
also writes the head's address to ``$RAY_TMPDIR/ray/ray_current_cluster`` (``/tmp/ray/...`` by
default, a folder a fresh machine does not have), so ``RAY_TMPDIR`` points into the cluster's own
directory while it runs. Only the processes this cluster started are stopped at the end, never a broad
``ray stop`` (which would end other users' clusters too). Usage statistics are off.

Skipped when Ray is not installed, unless ``HORDE_REQUIRE_CLUSTER=1`` (CI), which fails instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import pytest

from horde.cluster.coordinator import HEALTH_CHECKS

# Before Ray is imported anywhere in this process (both are read at import).
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

NODE_MEMORY = 1 << 30
OBJECT_STORE_MEMORY = 80 << 20
#: The health checks Horde ships for the clusters it starts (Ray's view of a dead node in ~3 s).
SYSTEM_CONFIG = HEALTH_CHECKS


def ray_or_skip() -> Any:
    try:
        import ray
    except ImportError:
        if os.environ.get("HORDE_REQUIRE_CLUSTER") == "1":
            pytest.fail(
                "HORDE_REQUIRE_CLUSTER=1 but Ray is not installed (pip install 'horde[cluster]')", pytrace=False
            )
        pytest.skip("Ray is not installed (pip install 'horde[cluster]')")
    return ray


class LocalCluster:
    """A head node with no CPUs (no generator lands there) and ``nodes`` worker nodes with one
    CPU each, named ``node0``, ``node1``... by a custom resource."""

    def __init__(self, nodes: int) -> None:
        ray_or_skip()
        from ray.cluster_utils import Cluster

        self.temp_dir = tempfile.mkdtemp(prefix="horde-ray-")
        # Ray's default temp dir is $RAY_TMPDIR/ray, created by no one but a previous Ray.
        os.makedirs(os.path.join(self.temp_dir, "ray"))
        self._previous_ray_tmpdir = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = self.temp_dir
        common = {"node_ip_address": "127.0.0.1", "object_store_memory": OBJECT_STORE_MEMORY, "memory": NODE_MEMORY}
        self._cluster = Cluster(initialize_head=False)
        try:
            self._cluster.add_node(
                **common,
                num_cpus=0,
                include_dashboard=False,
                temp_dir=self.temp_dir,
                resources={"head": 1},
                _system_config=SYSTEM_CONFIG,
            )
            self.nodes = [
                self._cluster.add_node(**common, num_cpus=1, resources={f"node{index}": 1}) for index in range(nodes)
            ]
            self._cluster.wait_for_nodes()
        except BaseException:
            self.shutdown()
            raise

    @property
    def address(self) -> str:
        address: str = self._cluster.address
        return address

    def kill_node(self, index: int) -> None:
        """Kills a worker node's processes at once (no graceful shutdown), as a lost machine."""
        self._cluster.remove_node(self.nodes[index], allow_graceful=False)

    def shutdown(self) -> None:
        """Stops the processes this cluster started, and only those."""
        try:
            self._cluster.shutdown()
        finally:
            if self._previous_ray_tmpdir is None:
                os.environ.pop("RAY_TMPDIR", None)
            else:
                os.environ["RAY_TMPDIR"] = self._previous_ray_tmpdir
            shutil.rmtree(self.temp_dir, ignore_errors=True)
