"""Short real runs against the built-in target, recorded in a store as `horde run` records them.

Shared by the tests of the results center (export, compare, report): each test needs a few
stored runs with known answers, and running them in-process (horde.engine.run.Run + the store) spares
an interpreter start-up per run.
"""

from __future__ import annotations

import time
from typing import Any

from horde.plan import plan_from_dict
from horde.engine.run import Run
from horde.store import Store
from horde.results.summary import summarise

#: Engine threads of the recorded runs: the machine running the tests is small and shared.
WORKERS = 1


def plan_dict(
    port: int, steps: list[dict[str, Any]], *, vus: int = 4, duration_s: float = 3.0, name: str = "results"
) -> dict[str, Any]:
    """A one-scenario closed-model plan against 127.0.0.1:``port``."""
    return {
        "version": 1,
        "name": name,
        "target": {"base_url": f"http://127.0.0.1:{port}"},
        "scenarios": [
            {
                "name": "s",
                "steps": steps,
                "workload": {"type": "closed", "start_vus": vus, "stages": [{"duration_s": duration_s, "vus": vus}]},
            }
        ],
        "graceful_stop_s": 2,
    }


def get(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "method": "GET", "path": path}


def record_run(
    store_url: str, plan: dict[str, Any], *, tags: dict[str, str] | None = None, timeout_s: float = 30.0
) -> str:
    """Run ``plan`` to its end, store it (snapshots, then the summary `horde show` computes) and
    return the run id."""
    parsed = plan_from_dict(plan)
    deadline = time.monotonic() + timeout_s
    with Store.open(store_url) as store:
        run_id = store.create_run(plan=plan, plan_name=parsed.name, parameters={"workers": WORKERS}, tags=tags or {})
        with Run.start(parsed, workers=WORKERS) as run:
            for snapshot in run:
                store.add_snapshot(run_id, snapshot)
                assert time.monotonic() < deadline, "the run did not end in time"
        summary = summarise(store.snapshots(run_id), run_id=run_id, status="finished", workers=WORKERS)
        store.finish_run(run_id, status="finished", summary=summary)
    return run_id
