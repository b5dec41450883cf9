"""Seeded fuzzing of plan files: whatever bytes a plan file holds, loading it gives a Plan or a
PlanInvalid with located problems, never another exception (no traceback reaches a user)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from horde.errors import PlanInvalid
from horde.plan import Plan
from horde.plan.loader import load_plan

QUICKSTART = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "plan.yaml"
TOKENS = [b":", b"-", b"{", b"}", b"[", b"]", b"\n", b"  ", b"'", b'"', b"&a", b"*a", b"!!python/object", b"\t",
          b"version", b"type", b"open", b"1e999", b"-1", b"null", b"~", b"\xff", b"#", b"%", b"|"]


def mutate(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(len(buffer) + 1)
        choice = rng.random()
        if choice < 0.3 and buffer:
            del buffer[position:position + rng.randint(1, 8)]
        elif choice < 0.7:
            buffer[position:position] = rng.choice(TOKENS)
        elif buffer:
            buffer[min(position, len(buffer) - 1)] = rng.randrange(256)
    return bytes(buffer)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_mutated_plan_files_never_crash(tmp_path: Path, suffix: str) -> None:
    rng = random.Random(20261122)
    if suffix == ".yaml":
        seed = QUICKSTART.read_bytes()
    else:
        seed = json.dumps(load_plan(QUICKSTART).model_dump(mode="json"), indent=1).encode()
    target = tmp_path / f"plan{suffix}"
    outcomes = {"valid": 0, "invalid": 0}
    for _ in range(400):
        target.write_bytes(mutate(seed, rng))
        try:
            plan = load_plan(target)
        except PlanInvalid as error:
            outcomes["invalid"] += 1
            assert error.problems, "an invalid plan names at least one problem"
            assert all(str(target) in problem.location or problem.location for problem in error.problems)
        else:
            assert isinstance(plan, Plan)
            outcomes["valid"] += 1
    # The mutations must have exercised both paths, or the test proves nothing.
    assert outcomes["invalid"] > 50 and outcomes["valid"] > 5, outcomes
