"""The ``horde`` command.

Every user mistake ends as ``error: ...`` and ``hint: ...`` lines on stderr with a documented
exit code (``horde.errors.ExitCode``, table in the README); only a bug in Horde prints a
traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from horde import __version__
from horde.errors import ExitCode, HordeError, InvalidInput, PlanInvalid
from horde.live import LiveView
from horde.overrides import apply_overrides, parse_duration, parse_header, parse_params, parse_tag, url_plan
from horde.plan import Plan, plan_from_dict, plan_json_schema, plan_to_json
from horde.planfile import LoadedPlan, load_plan_file
from horde.redaction import redact_plan
from horde.run import Run, checked_plan_json, engine_problems
from horde.store import Store
from horde.summary import CPU_SATURATION_PERCENT_PER_WORKER, summarise
from horde.summary_view import render_summary

app = typer.Typer(
    name="horde",
    help="Horde: load testing and capacity lab. Run `horde run --help` to start.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; lines there are long and whole.
stdout = Console() if Console().is_terminal else Console(width=160)
stderr = Console(stderr=True) if Console(stderr=True).is_terminal else Console(stderr=True, width=160)


def _load(plan_path: Path | None, url: str | None, method: str, headers: list[str], body: str | None,
          params: dict[str, str]) -> tuple[Plan, LoadedPlan | None]:
    if plan_path is not None and url is not None:
        raise InvalidInput("give either a plan file or --url, not both", hint="--url builds a one-step plan for quick checks")
    if plan_path is not None:
        loaded = load_plan_file(plan_path, params)
        return loaded.plan, loaded
    if url is not None and params:
        raise InvalidInput("-p sets a plan file's parameters; --url has none", hint="use -p with a plan file that declares parameters")
    if url is not None:
        data = url_plan(url, method=method, headers=[parse_header(h) for h in headers], body=body)
        return plan_from_dict(data, source="--url"), None
    raise InvalidInput("no plan given", hint="horde run PLAN (a .yaml/.json/.py file or a folder), or horde run --url URL")


@app.command()
def run(
    plan_path: Annotated[Optional[Path], typer.Argument(metavar="[PLAN]", help="plan file (.yaml, .json, .py) or a folder holding plan.yaml")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="quick check of one URL instead of a plan file")] = None,
    method: Annotated[str, typer.Option("--method", "-X", help="HTTP method for --url")] = "GET",
    header: Annotated[Optional[list[str]], typer.Option("--header", "-H", help="'Name: value' header for --url (repeatable)")] = None,
    body: Annotated[Optional[str], typer.Option("--body", help="request body for --url")] = None,
    vus: Annotated[Optional[int], typer.Option("--vus", help="closed model with this many VUs (every scenario)")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", help="open model at this many arrivals/s (every scenario)")] = None,
    max_vus: Annotated[Optional[int], typer.Option("--max-vus", help="open model: most VUs busy at once; arrivals beyond are dropped and counted")] = None,
    duration: Annotated[Optional[str], typer.Option("--duration", help="total length of each scenario's stages: 30s, 5m...")] = None,
    ramp_up: Annotated[Optional[str], typer.Option("--ramp-up", help="first part of --duration, a linear ramp from 0")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="override target.base_url")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="key=value stored with the run (repeatable)")] = None,
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL (default: $HORDE_STORE or ~/.local/share/horde/runs.sqlite)")] = None,
    summary_json: Annotated[Optional[Path], typer.Option("--summary-json", help="write the summary as JSON to this file")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="engine worker threads (default: one per core)")] = None,
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", metavar="NAME=VALUE", help="set a plan parameter (repeatable); else $HORDE_PARAM_NAME, else its default")] = None,
) -> int:
    """Run a plan against its target, live, and store the run."""
    params = parse_params(param or [])
    tags = dict(parse_tag(t) for t in tag or [])
    duration_s = parse_duration(duration, flag="--duration") if duration is not None else None
    ramp_up_s = parse_duration(ramp_up, flag="--ramp-up") if ramp_up is not None else None
    if workers is not None and workers < 1:
        raise InvalidInput(f"--workers must be at least 1 (got {workers})")
    if summary_json is not None and summary_json.is_dir():
        raise InvalidInput(f"--summary-json: {summary_json} is a directory", hint="give a file path, e.g. --summary-json summary.json")
    plan, loaded = _load(plan_path, url, method, header or [], body, params)
    plan = apply_overrides(plan, vus=vus, rate=rate, max_vus=max_vus, duration_s=duration_s, ramp_up_s=ramp_up_s, base_url=base_url)
    if loaded is not None:
        # The engine's own check, its problems placed on the plan file's lines.
        problems = engine_problems(plan_to_json(plan))
        if problems:
            raise PlanInvalid(loaded.located(problems), source=loaded.label)
    parameters = {
        name: value
        for name, value in (("vus", vus), ("rate", rate), ("max_vus", max_vus), ("duration_s", duration_s),
                            ("ramp_up_s", ramp_up_s), ("base_url", base_url), ("workers", workers),
                            ("params", params or None))
        if value is not None
    }
    # The store is opened before any load is sent: a run that cannot be kept is not started.
    plan_json = checked_plan_json(plan)
    with Store.open(store_url) as store:
        # The run is recorded before any load is sent, so that load never goes unrecorded.
        run_id = store.create_run(plan=redact_plan(json.loads(plan_json)), plan_name=plan.name, parameters=parameters, tags=tags)
        try:
            engine_run = Run.start(plan, workers=workers)
        except HordeError:
            store.finish_run(run_id, status="failed", summary=None)
            raise
        status = _drive(engine_run, store, run_id, plan, workers)
        effective_workers = workers or os.cpu_count() or 1
        summary = _final_summary(store, run_id, status, effective_workers)
        store.finish_run(run_id, status=status, summary=summary)
        render_summary(stdout, summary, store_url=store.display_url)
    if summary_json is not None:
        try:
            summary_json.parent.mkdir(parents=True, exist_ok=True)
            summary_json.write_text(json.dumps(summary, indent=2) + "\n")
        except OSError as error:
            raise InvalidInput(
                f"cannot write --summary-json {summary_json}: {error.strerror or error}",
                hint=f"the run is stored: `horde show {run_id} --json` prints the same summary",
            ) from error
    return ExitCode.INTERRUPTED if status == "interrupted" else ExitCode.OK


def _final_summary(store: Store, run_id: str, status: str, workers: int) -> dict[str, Any]:
    # Recomputed from what the store holds, so that `horde show` prints exactly these numbers.
    return summarise(store.snapshots(run_id), run_id=run_id, status=status, workers=workers)


class _Interrupts:
    """Counts Ctrl-C presses instead of raising KeyboardInterrupt wherever the program happens
    to be (in the middle of a store write, a snapshot would be lost)."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._count)
        return self

    def _count(self, signum: int, frame: object) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _drive(engine_run: Run, store: Store, run_id: str, plan: Plan, workers: int | None) -> str:
    """Feeds snapshots to the store and the live view until the run ends; handles Ctrl-C:
    the first stops the run gracefully, a second stops waiting for the drain."""
    cpu_limit = CPU_SATURATION_PERCENT_PER_WORKER * (workers or os.cpu_count() or 1)
    title = f"horde · {plan.name} · run {run_id}"
    with _Interrupts() as interrupts, LiveView(
        stdout, title=title, planned_duration_s=engine_run.planned_duration_s, cpu_limit_percent=cpu_limit
    ) as view:
        while not engine_run.finished:
            if interrupts.count >= 2:
                break  # second Ctrl-C: keep what is stored, stop waiting for the drain
            if interrupts.count == 1 and not engine_run.stop_requested:
                engine_run.stop()
                view.note_stopping()
            snapshot = engine_run.poll()  # waits at most POLL_INTERVAL_S, so Ctrl-C is seen soon
            if snapshot is not None:
                store.add_snapshot(run_id, snapshot)
                view.update(snapshot)
    return "interrupted" if interrupts.count else "finished"


@app.command()
def runs(
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    limit: Annotated[int, typer.Option("--limit", help="how many runs, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> int:
    """List stored runs, newest first."""
    with Store.open(store_url) as store:
        records = store.list_runs(limit=limit)
    if as_json:
        stdout.print_json(json.dumps([
            {"run_id": r.run_id, "plan": r.plan_name, "status": r.status, "started_at": r.started_at.isoformat(),
             "ended_at": r.ended_at.isoformat() if r.ended_at else None, "tags": r.tags}
            for r in records
        ]))
        return ExitCode.OK
    table = Table(header_style="bold")
    for column in ("run", "plan", "status", "started (UTC)", "duration s", "requests", "req/s", "p95 ms", "errors %", "tags"):
        table.add_column(column)
    for record in records:
        summary = record.summary or {}
        table.add_row(
            record.run_id, Text(record.plan_name), record.status, record.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            f"{summary.get('duration_s', 0):.1f}", f"{summary.get('requests', 0):,}", f"{summary.get('rps', 0):,.1f}",
            f"{summary.get('latency_ms', {}).get('p95', 0):.2f}", f"{summary.get('error_percent', 0):.2f}",
            Text(" ".join(f"{k}={v}" for k, v in record.tags.items())),
        )
    stdout.print(table)
    return ExitCode.OK


@app.command()
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, a unique prefix of one, or 'last'")],
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> int:
    """Show a stored run's summary, recomputed from its stored histograms."""
    with Store.open(store_url) as store:
        record = store.get_run(run_ref)
        workers = int(record.parameters.get("workers") or os.cpu_count() or 1)
        summary = summarise(store.snapshots(record.run_id), run_id=record.run_id, status=record.status, workers=workers)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render_summary(stdout, summary)
    return ExitCode.OK


@app.command()
def target(
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8080,
    workers: Annotated[Optional[int], typer.Option("--workers", help="capacity model: requests served at once")] = None,
    service_ms: Annotated[Optional[float], typer.Option("--service-ms", help="capacity model: service time of each request, ms")] = None,
    threads: Annotated[int, typer.Option("--threads", help="the target's own threads")] = 1,
) -> int:
    """Serve the built-in target until Ctrl-C: /, /delay/{ms}, /status/{code}, /bytes/{n}, /stall/{ms}."""
    from horde.target import serve_until_interrupted

    if (workers is None) != (service_ms is None):
        raise InvalidInput("--workers and --service-ms go together", hint="e.g. --workers 8 --service-ms 20 caps the target at 400 req/s")
    serve_until_interrupted(stdout, host=host, port=port, workers=workers, service_ms=service_ms, threads=threads)
    return ExitCode.OK


@app.command()
def schema() -> int:
    """Print the plan's JSON Schema (for editors that check YAML and JSON plans)."""
    print(json.dumps(plan_json_schema(), indent=2))
    return ExitCode.OK


@app.command()
def validate(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="plan file or folder")],
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", metavar="NAME=VALUE", help="set a plan parameter (repeatable); else $HORDE_PARAM_NAME, else its default")] = None,
) -> int:
    """Check a plan on both sides (pydantic and the engine) without sending any request."""
    loaded = load_plan_file(plan_path, parse_params(param or []))
    plan = loaded.plan
    problems = engine_problems(plan_to_json(plan))
    if problems:
        raise PlanInvalid(loaded.located(problems), source=loaded.label)
    steps = sum(1 for scenario in plan.scenarios for step in scenario.all_steps() if step.type == "http")
    durations = [sum(stage.duration_s for stage in scenario.workload.stages) for scenario in plan.scenarios]
    stdout.print(f"{plan_path}: valid — {len(plan.scenarios)} scenario(s), {steps} step(s), {max(durations):g} s of stages", markup=False)
    if plan.parameters:
        values = ", ".join(f"{name}={json.dumps(value)}" for name, value in plan.parameters.items())
        stdout.print(f"parameters: {values}", markup=False)
    return ExitCode.OK


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="print the version")] = False) -> None:
    if version:
        stdout.print(f"horde {__version__}")
        raise typer.Exit(0)


def print_error(error: HordeError) -> None:
    # soft_wrap: each message stays one line however long (logs are grepped for file:line).
    stderr.print(f"[bold red]error:[/] {escape(error.message)}", highlight=False, soft_wrap=True)
    if isinstance(error, PlanInvalid):
        for problem in error.problems:
            stderr.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
            if problem.hint:
                stderr.print(f"      hint: {problem.hint}", highlight=False, markup=False, soft_wrap=True)
    if error.hint:
        stderr.print(f"[bold cyan]hint:[/] {escape(error.hint)}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``horde`` command; returns (and exits with) the exit code."""
    try:
        code = app(args=argv, standalone_mode=False)
    except HordeError as error:
        print_error(error)
        code = error.exit_code
    except typer.TyperException as error:
        # Usage errors (unknown flag, bad value): the parser's own message, then exit code 2.
        show = getattr(error, "show", None)
        if callable(show):
            show()
        else:
            stderr.print(f"error: {error.format_message()}")
        code = ExitCode.INVALID_INPUT if error.exit_code == 2 else error.exit_code
    except (typer.Abort, KeyboardInterrupt):
        stderr.print("interrupted")
        code = ExitCode.INTERRUPTED
    except typer.Exit as exit_:
        code = exit_.exit_code
    code = int(code) if isinstance(code, int) else ExitCode.OK
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
