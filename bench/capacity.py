#!/usr/bin/env python3
"""Time to a capacity answer: `horde run --url URL --find-max` with no other flag against built-in
targets whose maxima are known (W workers × S ms: W × 1000 / S req/s; with exponential service
times, an M/M/W queue), a few repetitions each, the median time to the answer and the answer's
error; beside it, for one maximum, the seed's stepped ramp with the flags a user who knew the
answer picked (`--start 50 --step 50 --step-duration 5s`).

    .venv/bin/python bench/capacity.py            # 3 repetitions (~12 min)
    .venv/bin/python bench/capacity.py --reps 1   # one each (~4 min)

The target runs pinned to the second CPU, the generator to the first (as bench/run.py). Writes
the table in bench/FIGURES.md (unless --no-readme) and every run's capacity
block to bench/results/last-capacity.json. Exit code 2 for a set-up fault.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402  (bench/harness.py: the bench scripts' shared harness)
    REPO,
    BenchError,
    Processes,
    command_line,
    find_horde,
    load,
    machine,
    pick_cpus,
    run_main,
    write_readme_block,
)

#: (name, workers, service ms, service times): maxima from 100 to 10,000 req/s.
TARGETS: tuple[tuple[str, int, float, str], ...] = (
    ("100/s (1 × 10 ms)", 1, 10.0, "fixed"),
    ("400/s (4 × 10 ms)", 4, 10.0, "fixed"),
    ("400/s M/M/4 (exp., mean 10 ms)", 4, 10.0, "exponential"),
    ("2,000/s (20 × 10 ms)", 20, 10.0, "fixed"),
    ("10,000/s (100 × 10 ms)", 100, 10.0, "fixed"),
)
#: The stepped ramp a user who knew the answer picked (issue 13), on the 400/s target.
STEPPED = ("--start", "50", "--step", "50", "--step-duration", "5s")
RUN_TIMEOUT_S = 240


def start_target(procs: Processes, horde: str, cpu: str, workers: int, service_ms: float, times: str, log: Path) -> int:
    procs.start(
        [
            "taskset",
            "-c",
            cpu,
            horde,
            "target",
            "--port",
            "0",
            "--workers",
            str(workers),
            "--service-ms",
            str(service_ms),
            "--service-times",
            times,
        ],
        log,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise BenchError(
        "the built-in target did not start", hint=f"its output: {log.read_text(errors='replace')[-300:]!r}"
    )


def find_max(
    procs: Processes, horde: str, cpu: str, port: int, work: Path, tag: str, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    summary, log = work / f"{tag}.json", work / f"{tag}.log"
    started = time.monotonic()
    child = procs.start(
        [
            "taskset",
            "-c",
            cpu,
            horde,
            "run",
            "--url",
            f"http://127.0.0.1:{port}/",
            "--find-max",
            *extra,
            "--store",
            str(work / "store.sqlite"),
            "--summary-json",
            str(summary),
        ],
        log,
    )
    try:
        child.wait(timeout=RUN_TIMEOUT_S)
    except Exception as error:
        raise BenchError(f"find-max did not finish in {RUN_TIMEOUT_S} s", hint=f"see {log}") from error
    wall = time.monotonic() - started
    if child.returncode != 0 or not summary.exists():
        raise BenchError(f"find-max exited {child.returncode}", hint=log.read_text(errors="replace")[-500:])
    capacity: dict[str, Any] = json.loads(summary.read_text())["capacity"]
    capacity["wall_s"] = round(wall, 1)
    return capacity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="find-max with no flags: time to the answer and its error, for known maxima."
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions per target (default 3)")
    parser.add_argument("--no-readme", action="store_true", help="do not update bench/FIGURES.md")
    parser.add_argument("--horde", help="the horde command (default: next to this Python)")
    args = parser.parse_args(argv)
    reps = max(1, min(args.reps, 20))
    command = command_line(__file__, argv)

    def body(procs: Processes) -> int:
        rows, raw = [], []
        horde = find_horde(args.horde)
        gen_cpu, target_cpu, notes = pick_cpus()
        started = dt.datetime.now(dt.timezone.utc)
        load_before = load()
        with tempfile.TemporaryDirectory(prefix="horde-bench-capacity-") as work_dir:
            work = Path(work_dir)
            cases: list[tuple[str, int, float, str, tuple[str, ...]]] = [
                (name, workers, service, times, ()) for name, workers, service, times in TARGETS
            ]
            cases.append(("400/s (4 × 10 ms), stepped ramp " + " ".join(STEPPED), 4, 10.0, "fixed", STEPPED))
            for index, (name, workers, service, times, extra) in enumerate(cases):
                truth = workers * 1000 / service
                port = start_target(procs, horde, target_cpu, workers, service, times, work / f"target-{index}.log")
                runs = [
                    find_max(procs, horde, gen_cpu, port, work, f"case{index}-rep{rep}", extra) for rep in range(reps)
                ]
                procs.close()  # this case's target (and nothing else is left running)
                errors = [100.0 * (run["max_rps"] - truth) / truth for run in runs if run.get("max_rps")]
                row = {
                    "target": name,
                    "truth": truth,
                    "runs": len(runs),
                    "answer_median": statistics.median(run["max_rps"] or 0.0 for run in runs),
                    "error_percent_worst": max(errors, key=abs) if errors else None,
                    "answer_after_s_median": statistics.median(run["answer_after_s"] or 0 for run in runs),
                    "wall_s_median": statistics.median(run["wall_s"] for run in runs),
                    "steps_median": statistics.median(len(run["steps"]) for run in runs),
                    "set_aside_s_total": sum(run.get("set_aside_s") or 0 for run in runs),
                }
                rows.append(row)
                raw.append({"case": name, "runs": runs})
                print(f"{name}: {row}", flush=True)
        load_after = load()
        lines = [
            f"`{command}` · {started:%Y-%m-%d %H:%M} UTC · {machine()['nproc']} CPUs ({machine()['model']}) · "
            f"load {load_before} → {load_after}",
            "",
            "| target (known maximum) | runs | answer (median) | worst error | answer after (median) | wall (median) | steps (median) | seconds set aside |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            worst = "—" if row["error_percent_worst"] is None else f"{row['error_percent_worst']:+.1f} %"
            lines.append(
                f"| {row['target']} | {row['runs']} | {row['answer_median']:,.1f} req/s | {worst} | "
                f"{row['answer_after_s_median']:g} s | {row['wall_s_median']:g} s | {row['steps_median']:g} | "
                f"{row['set_aside_s_total']} |"
            )
        lines.extend(f"\nnote: {note}" for note in notes)
        block = "\n".join(lines) + "\n"
        print(block)
        results = REPO / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "last-capacity.json").write_text(json.dumps({"rows": rows, "raw": raw}, indent=2) + "\n")
        if not args.no_readme:
            write_readme_block(
                "last-figures:capacity",
                f"### Time to a capacity answer (`bench/capacity.py`)\n\n{block}",
                section="Time to a capacity answer (`bench/capacity.py`)",
            )
        return 0

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
