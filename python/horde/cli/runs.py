"""``horde runs`` and ``horde show``: the stored runs, newest first, and one run's summary
recomputed from its stored histograms. ``register(app)`` adds them to the ``horde`` application."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.text import Text

from horde.errors import ExitCode
from horde.cli.arguments import HordeCommand
from horde.cli.terminal import stdout


def register(app: typer.Typer) -> None:
    """Add ``runs`` and ``show`` to ``app``."""
    app.command("runs", cls=HordeCommand, epilog="Examples:\n\n  horde runs\n\n  horde runs --limit 5 --json")(runs)
    app.command("show", cls=HordeCommand, epilog="Examples:\n\n  horde show last\n\n  horde show 20261123 --json")(show)


def runs(
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    limit: Annotated[int, typer.Option("--limit", help="how many runs, newest first")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> int:
    """List stored runs, newest first."""
    from horde.cli.console import Column, fitted_table
    from horde.results.summary import summarise
    from horde.store import Store

    with Store.open(store_url) as store:
        records = store.list_runs(limit=limit)
        # A run with no summary stored (still going, or aborted: its process died before writing
        # one) is summed up from its stored seconds, as `horde show` does, so that both agree.
        summaries = {
            record.run_id: record.summary
            or summarise(store.snapshots(record.run_id), run_id=record.run_id, status=record.status)
            for record in records
        }
    if as_json:
        stdout.print_json(
            json.dumps(
                [
                    {
                        "run_id": r.run_id,
                        "plan": r.plan_name,
                        "status": r.status,
                        "started_at": r.started_at.isoformat(),
                        "ended_at": r.ended_at.isoformat() if r.ended_at else None,
                        "tags": r.tags,
                        **{key: summaries[r.run_id].get(key) for key in ("duration_s", "requests", "errors", "rps")},
                    }
                    for r in records
                ]
            )
        )
        return ExitCode.OK
    # A narrow terminal drops the least telling columns; the run id is never cut.
    columns = [
        Column("run", 100, "left", keep=True),
        Column("plan", 80, "left"),
        Column("status", 90, "left"),
        Column("started (UTC)", 60, "left"),
        Column("duration s", 40),
        Column("requests", 70),
        Column("req/s", 50),
        Column("p95 ms", 55),
        Column("errors %", 65),
        Column("tags", 30, "left"),
    ]
    rows = []
    for record in records:
        summary = summaries[record.run_id]
        rows.append(
            [
                record.run_id,
                Text(record.plan_name),
                record.status,
                record.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                f"{summary.get('duration_s', 0):.1f}",
                f"{summary.get('requests', 0):,}",
                f"{summary.get('rps', 0):,.1f}",
                f"{summary.get('latency_ms', {}).get('p95', 0):.2f}",
                f"{summary.get('error_percent', 0):.2f}",
                Text(" ".join(f"{k}={v}" for k, v in record.tags.items())),
            ]
        )
    stdout.print(fitted_table(stdout, columns, rows))
    return ExitCode.OK


def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, a unique prefix of one, or 'last'")],
    store_url: Annotated[Optional[str], typer.Option("--store", help="store path or URL")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> int:
    """Show a stored run's summary, recomputed from its stored histograms."""
    from horde.cli.console import render_judgement, render_summary
    from horde.results.stored_run import load_run
    from horde.store import Store

    # Recomputed from the stored seconds, with what was judged as the run ended (thresholds,
    # autostop, capacity) kept as stored.
    with Store.open(store_url) as store:
        summary = load_run(store, run_ref).summary
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render_summary(stdout, summary)
        render_judgement(stdout, summary)
    return ExitCode.OK
