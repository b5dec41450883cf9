"""Scenario overhead: the generator's CPU per request for the game scenario (templates, JSON
extraction and checks, a weighted choice, a group, cookies) against a plain loop of the same
requests (same endpoints, same mix, same rate, every request fixed and encoded once), side by side
in one run. What differs is the interpreter's work; the target for the scenario language is
under 30 % overhead. (bench/run.py also runs the game scenario, closed-loop, beside wrk's plain
GET: that figure is the scenario's whole cost against the leanest HTTP client; this one isolates
the language.)

    .venv/bin/python bench/scenario.py            # 3 repetitions x 8 s per plan (~2 min)
    .venv/bin/python bench/scenario.py --reps 5 --seconds 10 --rate 4000

Method (as in run.py): the built-in target and the generator each pinned to a CPU; every
repetition runs each plan for N seconds and for 1 second, and the start-up corrected cost is
(CPU_N - CPU_1) / (requests_N - requests_1): the cost of one more request once the run is going.
CPU comes from wait4()'s rusage of the generator process itself. Plans: bench/plans/*.yaml.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402  (bench/harness.py: processes, pinning, exact CPU measurement)

BENCH = Path(__file__).resolve().parent
PLANS = BENCH / "plans"
TARGET_OVERHEAD = 0.30
#: An iteration of bench/plans/game.yaml makes about this many requests (measured: 1.005; a build
#: that finds something buildable makes two, and players soon run out of resources).
GAME_REQUESTS_PER_ITERATION = 1.0
#: The game scenario's action mix (its choice weights), which the plain loop reproduces.
MIX = {"city": 0.40, "buildings": 0.25, "collect": 0.25, "resources": 0.10}


def login(port: int) -> str:
    """Registers and logs in one player of the built-in game; its token for the plain loop."""

    def post(path: str, body: dict[str, str]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as error:
            if error.code == 409:  # registered by an earlier repetition
                return {}
            raise

    post("/game/register", {"login": "bench-plain", "password": "secret"})
    return str(post("/game/login", {"login": "bench-plain", "password": "secret"})["token"])


def plan_run(
    env: harness.Env, plan: str, port: int, params: dict[str, str], seconds: int, tag: str, target_pid: int
) -> tuple[harness.Measured, dict[str, Any]]:
    flags = [flag for name, value in params.items() for flag in ("-p", f"{name}={value}")]
    args = [str(PLANS / plan), "--base-url", f"http://127.0.0.1:{port}", *flags, "-p", f"duration={seconds}"]
    return harness.horde_run(env, args, seconds, tag, target_pid)


def measure(env: harness.Env, reps: int, seconds: int, rate: float) -> dict[str, Any]:
    target, port = harness.start_target(env)
    rows: dict[str, list[dict[str, float]]] = {"plain": [], "game": []}
    try:
        token = login(port)
        plain_params = {"token": token, **{f"{action}_rate": f"{rate * share:g}" for action, share in MIX.items()}}
        plans = {
            "plain": ("plain.yaml", plain_params),
            "game": ("game.yaml", {"rate": f"{rate / GAME_REQUESTS_PER_ITERATION:g}"}),
        }
        for rep in range(reps):
            order = ["plain", "game"] if rep % 2 == 0 else ["game", "plain"]
            for name in order:
                plan, params = plans[name]
                long, long_summary = plan_run(env, plan, port, params, seconds, f"{name}-{rep}", target.pid)
                short, short_summary = plan_run(env, plan, port, params, 1, f"{name}-{rep}-short", target.pid)
                requests = long_summary["requests"] - short_summary["requests"]
                rows[name].append(
                    {
                        "rps": long_summary["rps"],
                        "errors": long_summary["errors"],
                        "raw_us": long.cpu_s / long_summary["requests"] * 1e6,
                        "marginal_us": (long.cpu_s - short.cpu_s) / requests * 1e6 if requests > 0 else float("nan"),
                        "others": long.others_cores,
                    }
                )
    finally:
        env.procs.stop(target)
    medians = {
        name: {key: statistics.median(row[key] for row in values) for key in values[0]} for name, values in rows.items()
    }
    return {
        "rows": rows,
        "medians": medians,
        "overhead": medians["game"]["marginal_us"] / medians["plain"]["marginal_us"] - 1.0,
    }


def render(result: dict[str, Any], command: str, reps: int, seconds: int, rate: float) -> str:
    machine = harness.machine()
    plain, game = result["medians"]["plain"], result["medians"]["game"]
    met = "met" if result["overhead"] < TARGET_OVERHEAD else "NOT met"
    lines = [
        "### Scenario overhead",
        "",
        f"- machine: {machine['nproc']} CPUs, {machine['model']}, Linux {machine['kernel']}",
        f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC; command: `{command}`",
        f"- {reps} x {seconds} s per plan (plus 1 s runs for the start-up correction), plain rate {rate:g} req/s, `--workers 1`, generator and target pinned",
        "",
        "| plan | req/s | errors | generator CPU µs/req (raw) | start-up corrected | others' CPU (cores) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| the same requests, fixed (`bench/plans/plain.yaml`) | {plain['rps']:,.0f} | {plain['errors']:.0f} | {plain['raw_us']:.2f} | {plain['marginal_us']:.2f} | {plain['others']:.2f} |",
        f"| game scenario (`bench/plans/game.yaml`) | {game['rps']:,.0f} | {game['errors']:.0f} | {game['raw_us']:.2f} | {game['marginal_us']:.2f} | {game['others']:.2f} |",
        "",
        f"Scenario overhead (game / plain - 1, start-up corrected): **{result['overhead'] * 100:.0f} %**; target under {TARGET_OVERHEAD * 100:.0f} %: **{met}**.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return harness.side_by_side_main(
        argv,
        script=__file__,
        description="Generator CPU per request: the game scenario against a plain GET loop.",
        default_rate=3000.0,
        rate_help="requests/s of the plain loop (the game matches it)",
        measure=measure,
        render=render,
        block="scenario-overhead",
    )


if __name__ == "__main__":
    sys.exit(main())
