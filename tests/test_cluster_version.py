"""A cluster run refuses generators that do not run this Horde (issue 41): each node's
``describe`` carries its Horde version and its engine build (the sha256 of the extension it
loaded), and the coordinator's check refuses any difference before anything is sent, exit code 6,
naming the node. Checked on the check itself with a real generator's description (a cluster of
mismatched installs is too heavy to build for this); tests/test_cluster.py runs real clusters
whose generators pass it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

import horde
import horde._engine
from horde.cluster.coordinator import check_same_horde
from horde.cluster.generator import Generator
from horde.errors import ClusterUnavailable, ExitCode


def described() -> dict[str, Any]:
    """What a generator in this very process says of itself (no Ray: the class is plain)."""
    return Generator(index=-1).describe()


def test_a_generator_names_its_version_and_the_engine_it_loaded() -> None:
    description = described()
    assert description["horde_version"] == horde.__version__
    # The engine build is the extension file's hash, computed here from the file itself.
    assert description["engine_build"] == hashlib.sha256(Path(horde._engine.__file__).read_bytes()).hexdigest()[:16]


def test_generators_running_this_horde_pass() -> None:
    check_same_horde({"10.0.0.2 (aaaaaaaa)": described(), "10.0.0.3 (bbbbbbbb)": described()})


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"horde_version": "0.0.9"}, "runs horde 0.0.9 (engine build {build})"),
        ({"engine_build": "0123456789abcdef"}, "runs horde {version} (engine build 0123456789abcdef)"),
        ({"horde_version": None, "engine_build": None}, "runs horde unknown (engine build unknown)"),
    ],
)
def test_a_generator_running_another_horde_is_refused_by_name(change: dict[str, Any], shown: str) -> None:
    here = described()
    other = {key: value for key, value in {**here, **change}.items() if value is not None}
    with pytest.raises(ClusterUnavailable) as raised:
        check_same_horde({"10.0.0.2 (aaaaaaaa)": here, "10.0.0.3 (bbbbbbbb)": other})
    error = raised.value
    assert error.exit_code == ExitCode.CLUSTER_UNAVAILABLE == 6
    expected = shown.format(version=horde.__version__, build=here["engine_build"])
    assert error.message == (
        f"1 node does not run this Horde (horde {horde.__version__}, engine build "
        f"{here['engine_build']}): 10.0.0.3 (bbbbbbbb) {expected}"
    )
    assert "10.0.0.2" not in error.message
    assert error.hint is not None and "same wheel" in error.hint and "docs/cluster.md" in error.hint


def test_every_differing_node_is_named() -> None:
    other = {**described(), "horde_version": "0.2.0"}
    with pytest.raises(ClusterUnavailable, match=r"^2 nodes do not run this Horde .*: a runs horde 0\.2\.0 .*; b runs"):
        check_same_horde({"a": other, "b": other, "c": described()})
