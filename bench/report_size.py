"""The size of `horde report`'s HTML file: a short run, a 30-minute run and a cluster run's
merged report, and a comparison of two runs (issue 41: a 25 s run's report was 4.9 MB when the
whole of plotly.js was inlined; it must stay under 1 MB, one file that works offline).

    .venv/bin/python bench/report_size.py              # about 30 s
    .venv/bin/python bench/report_size.py --no-readme  # print the figures only
    .venv/bin/python bench/report_size.py --keep DIR   # and keep the four reports in DIR

What is measured, and how each run is made:

- **short**: examples/quickstart (5 s ramp to 20 VUs, 15 s hold, its graceful stop) run for
  real by `horde run` against the built-in target on loopback, stored in a fresh SQLite store;
- **30 minutes**: not run for 30 minutes: the short run's held seconds repeated and renumbered
  second by second to 1,800 stored seconds, each step's latencies drawn afresh every second
  (log-normal around that second's median, so that the figures do not repeat: the report packs
  them with gzip, and repeats would flatter it) into a real histogram, and its summary computed
  by `horde show`'s own code (`summarise`). A report grows with its stored seconds and steps;
- **cluster**: the short run's seconds as two generators would send them, merged by the
  coordinator's own merge (`horde.engine.snapshot.merge_seconds`, histograms merged exactly) with
  its per-generator rows, and a `cluster` summary block: what a two-generator cluster run stores;
- **comparison**: `horde report SHORT THIRTY_MINUTES`.

Each report is written by the real `horde report RUN -o FILE`; sizes are the file's bytes, and
the share that is the chart code (plotly.js's basic bundle, gzip then base64) is given apart.
Figures go to bench/FIGURES.md ("Report size") and bench/results/last-report-size.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

#: Stored seconds of the synthesized long run.
LONG_SECONDS = 1800
#: Generators of the synthesized cluster run.
GENERATORS = 2


def run_quickstart(env: harness.Env, store: str) -> str:
    """The quickstart run for real against the built-in target; its run id."""
    _, port = harness.start_target(env)
    summary_file = env.work / "short.json"
    result = subprocess.run(
        [
            env.horde,
            "run",
            str(harness.REPO / "examples/quickstart"),
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--store",
            store,
            "--summary-json",
            str(summary_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise harness.BenchError(f"horde run exited {result.returncode}", hint=result.stderr[-800:])
    return str(json.loads(summary_file.read_text())["run_id"])


def varied_second(held: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A held second with each step's latencies drawn afresh (log-normal around the step's
    median in that second, count within 10 %) and the generator's readings jittered: real
    seconds differ, and a report's packed figures compress by what repeats."""
    from horde.engine import histogram

    steps = []
    for step in held["steps"]:
        if not step.get("histogram") or not step.get("requests"):
            steps.append(step)
            continue
        median_us = max(histogram.stats(step["histogram"], [50.0]).percentile(50.0) * 1000.0, 1.0)
        requests = max(1, round(int(step["requests"]) * rng.uniform(0.9, 1.1)))
        failed = min(requests, int(step["requests"]) - int(step.get("ok", step["requests"])))
        latencies = [max(1, round(rng.lognormvariate(math.log(median_us), 0.25))) for _ in range(requests)]
        steps.append(
            {**step, "requests": requests, "ok": requests - failed, "histogram": histogram.from_values(latencies)}
        )
    jitter = {
        key: float(held[key]) * rng.uniform(0.8, 1.2)
        for key in ("cpu_percent", "timer_lateness_p99_ms")
        if held.get(key) is not None
    }
    return {**held, **jitter, "steps": steps}


def store_long_run(store_url: str, short_id: str) -> str:
    """A 30-minute run made of the short run's held seconds, renumbered and varied (see the
    module's text and :func:`varied_second`)."""
    from horde.results.stored_run import load_run
    from horde.results.summary import summarise
    from horde.store import Store

    rng = random.Random(41)
    with Store.open(store_url) as store:
        short = load_run(store, short_id)
        peak = max(int(snapshot.get("active_vus") or 0) for snapshot in short.snapshots)
        held = [
            snapshot
            for snapshot in short.snapshots
            if int(snapshot.get("active_vus") or 0) == peak and not snapshot.get("final")
        ]
        start = float(short.snapshots[0]["timestamp"]) - float(short.snapshots[0]["elapsed_s"])
        run_id = store.create_run(
            plan=short.record.plan,
            plan_name="quickstart (30 min, synthesized)",
            parameters=short.record.parameters,
            tags={"bench": "report-size"},
        )
        seconds = []
        for second in range(1, LONG_SECONDS + 1):
            snapshot = {
                **varied_second(held[second % len(held)], rng),
                "second": second,
                "elapsed_s": float(second),
                "interval_s": 1.0,
                "timestamp": start + second,
                "final": second == LONG_SECONDS,
            }
            store.add_snapshot(run_id, snapshot)
            seconds.append(snapshot)
        store.finish_run(run_id, status="finished", summary=summarise(seconds, run_id=run_id, status="finished"))
    return run_id


def store_cluster_run(store_url: str, short_id: str) -> str:
    """The short run as a two-generator cluster run's merged seconds (see the module's text)."""
    from horde.cluster.merge import generator_row
    from horde.engine.snapshot import merge_seconds
    from horde.results.stored_run import load_run
    from horde.results.summary import summarise
    from horde.store import Store

    with Store.open(store_url) as store:
        short = load_run(store, short_id)
        run_id = store.create_run(
            plan=short.record.plan,
            plan_name="quickstart (2 generators, merged)",
            parameters=short.record.parameters,
            tags={"bench": "report-size"},
        )
        merged_seconds = []
        for snapshot in short.snapshots:
            parts = [snapshot] * GENERATORS
            merged = merge_seconds(parts, final=bool(snapshot.get("final")))
            merged["generators"] = [
                generator_row(index, f"127.0.0.{index + 1}", "running", part) for index, part in enumerate(parts)
            ]
            merged["lost_share"] = 0.0
            store.add_snapshot(run_id, merged)
            merged_seconds.append(merged)
        summary = summarise(merged_seconds, run_id=run_id, status="finished")
        summary["cluster"] = {
            "generators": [
                {"generator": index, "node": f"127.0.0.{index + 1}", "share": 1 / GENERATORS, "state": "finished"}
                for index in range(GENERATORS)
            ],
            "max_start_skew_ms": 0.4,
            "lost": [],
            "lost_share": 0.0,
            "stopped_for_loss": False,
        }
        store.finish_run(run_id, status="finished", summary=summary)
    return run_id


def report_bytes(env: harness.Env, store: str, name: str, run_ids: list[str]) -> int:
    page = env.work / f"{name}.html"
    result = subprocess.run(
        [env.horde, "report", *run_ids, "-o", str(page), "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise harness.BenchError(f"horde report ({name}) exited {result.returncode}", hint=result.stderr[-800:])
    return page.stat().st_size


def measure(env: harness.Env) -> dict[str, Any]:
    from horde.report.page import plotly_js, plotly_js_packed

    store_path = env.work / "runs.sqlite"
    store = str(store_path)
    store_url = f"sqlite:///{store_path}"
    started = time.monotonic()
    short_id = run_quickstart(env, store)
    long_id = store_long_run(store_url, short_id)
    cluster_id = store_cluster_run(store_url, short_id)
    sizes = {
        "short": report_bytes(env, store, "short", [short_id]),
        "30 minutes": report_bytes(env, store, "long", [long_id]),
        "cluster": report_bytes(env, store, "cluster", [cluster_id]),
        "comparison": report_bytes(env, store, "comparison", [short_id, long_id]),
    }
    return {
        "sizes": sizes,
        "chart_code_bytes": len(plotly_js_packed()),
        "plotly_basic_bytes": len(plotly_js().encode()),
        "long_seconds": LONG_SECONDS,
        "generators": GENERATORS,
        "seconds_taken": round(time.monotonic() - started, 1),
    }


def render(figures: dict[str, Any], command: str) -> str:
    machine = harness.machine()
    lines = [
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `{command}` "
        f"({machine['nproc']} CPUs, {machine['model']}).",
        "",
        "| report | bytes | MB | of which chart code |",
        "|---|---:|---:|---:|",
    ]
    for name, size in figures["sizes"].items():
        lines.append(f"| {name} | {size:,} | {size / 1e6:.2f} | {figures['chart_code_bytes'] / size:.0%} |")
    lines += [
        "",
        f"Chart code: plotly.js basic {figures['plotly_basic_bytes']:,} bytes, carried as "
        f"{figures['chart_code_bytes']:,} bytes (gzip, base64). Before issue 41 the full plotly.js "
        "(4,815,814 bytes) was inlined: the short run's report was 4.9 MB.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--no-readme", action="store_true", help="print the figures; leave bench/FIGURES.md as it is")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the reports in this folder (to open them)")
    parser.add_argument("--horde", help="the horde command (default: the one beside this Python)")
    args = parser.parse_args(argv)

    def body(procs: harness.Processes) -> int:
        horde = harness.find_horde(args.horde)
        with tempfile.TemporaryDirectory(prefix="horde-report-size-") as work:
            generator_cpu, target_cpu, _ = harness.pick_cpus()
            env = harness.Env(
                horde=horde, wrk="", gen_cpu=generator_cpu, target_cpu=target_cpu, work=Path(work), procs=procs
            )
            figures = measure(env)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for page in Path(work).glob("*.html"):
                    shutil.copy(page, args.keep / page.name)
        text = render(figures, harness.command_line(__file__, argv))
        print(text)
        if not args.no_readme:
            harness.RESULTS_DIR.mkdir(exist_ok=True)
            (harness.RESULTS_DIR / "last-report-size.json").write_text(json.dumps(figures, indent=2) + "\n")
            harness.write_readme_block("report-size", text, section="Report size (`bench/report_size.py`)")
        return 0

    return harness.run_main(body)


if __name__ == "__main__":
    sys.exit(main())
