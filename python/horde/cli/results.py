"""The results commands of ``horde``: ``report``, ``export``, ``compare`` and ``trend``.

They read stored runs only (no load is sent). ``register(app)`` adds them to the ``horde``
application; errors follow ``horde.cli``'s conventions (a :class:`~horde.errors.HordeError` with
a hint, printed as ``error:``/``hint:`` lines, with the documented exit code: 2 for a bad flag
or an unknown run, 3 for a store that cannot be opened). ``compare --fail-on`` exits 18 when the
candidate regressed beyond a gate, so that a CI job can fail a build on it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional, TextIO

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from horde.cli.arguments import HordeCommand
from horde.errors import ExitCode, InvalidInput

if TYPE_CHECKING:  # types only: the commands import their layers when they run
    from horde.results.compare import ComparisonRule, Gate, Regression

# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; as in horde.cli, lines stay whole.
_stdout = Console() if Console().is_terminal else Console(width=200)

_COMMANDS = ("report", "export", "compare", "trend")
_STORE_HELP = "store path or URL (default: $HORDE_STORE or ~/.local/share/horde/runs.sqlite)"
_RUN_HELP = "run id, a unique prefix of one, or 'last'"


def register(app: typer.Typer) -> None:
    """Add the results commands to ``app`` (a second call does nothing)."""
    if any(info.name in _COMMANDS for info in app.registered_commands):
        return
    app.command(
        "report",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde report last -o report.html\n\n  horde report RUN_A RUN_B RUN_C",
    )(report)
    app.command(
        "export",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde export last --format csv -o seconds.csv\n\n  horde export 20261123 --format json",
    )(export)
    app.command(
        "compare",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde compare RUN_A RUN_B"
        "\n\n  horde compare 20261122 last --alpha 0.05"
        "\n\n  horde compare 20261122 last --fail-on p95:10% --fail-on errors:1",
    )(compare)
    app.command(
        "trend",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde trend build\n\n  horde trend build --step checkout --json",
    )(trend_command)


def _rule(alpha: float, min_change_percent: float, min_change_ms: float, min_requests: int) -> ComparisonRule:
    from horde.results.compare import ComparisonRule

    try:
        return ComparisonRule(
            alpha=alpha,
            min_relative_change=min_change_percent / 100.0,
            min_absolute_change_ms=min_change_ms,
            min_requests=min_requests,
        )
    except ValueError as error:
        raise InvalidInput(
            str(error), hint="e.g. --alpha 0.01 --min-change 5 --min-change-ms 0.1 --min-requests 20"
        ) from None


AlphaOption = Annotated[float, typer.Option("--alpha", help="significance level of the test (p-value below it)")]
MinChangeOption = Annotated[float, typer.Option("--min-change", help="smallest p50/p90 change that matters, in %")]
MinChangeMsOption = Annotated[
    float, typer.Option("--min-change-ms", help="smallest p50/p90 change that matters, in ms")
]
MinRequestsOption = Annotated[int, typer.Option("--min-requests", help="fewer requests in either run: not enough data")]
StoreOption = Annotated[Optional[str], typer.Option("--store", help=_STORE_HELP)]


def report(
    run_refs: Annotated[
        list[str], typer.Argument(metavar="RUN", help=f"{_RUN_HELP}; two or more: a comparison with the first")
    ],
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="HTML file to write (default: report-RUN.html)")
    ] = None,
    store_url: StoreOption = None,
    alpha: AlphaOption = 0.01,
    min_change: MinChangeOption = 5.0,
    min_change_ms: MinChangeMsOption = 0.1,
    min_requests: MinRequestsOption = 20,
) -> int:
    """Write a self-contained HTML report of a run, or a comparison of several (works offline)."""
    from horde.results.stored_run import load_run
    from horde.store import Store
    from horde.report import write_report  # plotly.js and jinja2 only when a report is made

    rule = _rule(alpha, min_change, min_change_ms, min_requests)
    with Store.open(store_url) as store:
        runs = [load_run(store, ref) for ref in run_refs]
    if output is None:
        name = runs[0].run_id if len(runs) == 1 else f"{runs[0].run_id}-vs-{runs[-1].run_id}"
        output = Path(f"{'report' if len(runs) == 1 else 'comparison'}-{name}.html")
    if output.is_dir():
        raise InvalidInput(f"-o: {output} is a directory", hint="give a file path, e.g. -o report.html")
    written = write_report(runs, output, rule)
    _stdout.print(
        f"report written to {written} (open it in a browser; it works offline)", markup=False, highlight=False
    )
    return ExitCode.OK


def export(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help=_RUN_HELP)],
    export_format: Annotated[str, typer.Option("--format", "-f", help="csv or json")] = "csv",
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="file to write (default: standard output)")
    ] = None,
    store_url: StoreOption = None,
) -> int:
    """Export a run's per-second, per-step figures as CSV or JSON."""
    from horde.results.export import FORMATS, write_export
    from horde.results.stored_run import load_run
    from horde.store import Store

    chosen = export_format.lower()
    if chosen not in FORMATS:
        raise InvalidInput(
            f"--format must be csv or json (got {export_format!r})", hint="horde export RUN --format json"
        )
    if output is not None and output.is_dir():
        raise InvalidInput(f"-o: {output} is a directory", hint="give a file path, e.g. -o run.csv")
    with Store.open(store_url) as store:
        results = load_run(store, run_ref)
    with _destination(output) as stream:
        write_export(results, "json" if chosen == "json" else "csv", stream)
    return ExitCode.OK


@contextmanager
def _destination(output: Path | None) -> Iterator[TextIO]:
    if output is None:
        yield sys.stdout
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        # newline="": the csv module writes its own line ends.
        stream = output.open("w", encoding="utf-8", newline="")
    except OSError as error:
        raise InvalidInput(
            f"cannot write {output}: {error.strerror or error}", hint="give a writable path with -o"
        ) from error
    with stream:
        yield stream


def compare(
    baseline_ref: Annotated[str, typer.Argument(metavar="BASELINE", help=_RUN_HELP)],
    candidate_ref: Annotated[str, typer.Argument(metavar="CANDIDATE", help=_RUN_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
    store_url: StoreOption = None,
    alpha: AlphaOption = 0.01,
    min_change: MinChangeOption = 5.0,
    min_change_ms: MinChangeMsOption = 0.1,
    min_requests: MinRequestsOption = 20,
    fail_on: Annotated[
        Optional[list[str]],
        typer.Option(
            "--fail-on",
            metavar="METRIC:MARGIN",
            help="exit 18 when a step is significantly worse than the baseline by more than MARGIN: p50, p90, "
            "p95, p99 or mean (% slower), rps (% lower), errors (points of the error share); "
            "repeatable",
        ),
    ] = None,
) -> int:
    """Compare two runs step by step: percentiles, errors, and a statistical verdict; with
    --fail-on, exit 18 on a regression (a CI job's gate)."""
    from horde.cli.console import render_comparison
    from horde.results.compare import compare_runs, regressions
    from horde.results.stored_run import RunResults, load_run
    from horde.store import Store

    rule = _rule(alpha, min_change, min_change_ms, min_requests)
    gates = [_gate(text) for text in fail_on or []]
    with Store.open(store_url) as store:
        baseline: RunResults = load_run(store, baseline_ref)
        candidate: RunResults = load_run(store, candidate_ref)
    comparison = compare_runs(baseline, candidate, rule)
    found = regressions(comparison, gates)
    if as_json:
        document = comparison.to_dict()
        if gates:
            document["gates"] = [str(gate) for gate in gates]
            document["regressions"] = [asdict(regression) for regression in found]
        print(json.dumps(document, indent=2))
    else:
        render_comparison(_stdout, comparison)
        if gates:
            _render_gates(gates, found)
    return ExitCode.REGRESSION if found else ExitCode.OK


def _gate(text: str) -> Gate:
    from horde.results.compare import Gate

    try:
        return Gate.parse(text)
    except ValueError as error:
        raise InvalidInput(
            f"--fail-on {text}: {error}",
            hint="e.g. --fail-on p95:10% (p95 over 10 % slower), --fail-on errors:1 (1 point "
            "more errors), --fail-on rps:5% (5 % less throughput)",
        ) from None


def _render_gates(gates: list[Gate], found: list[Regression]) -> None:
    watched = ", ".join(str(gate) for gate in gates)
    if not found:
        _stdout.print(f"no regression beyond --fail-on {watched}", markup=False, highlight=False, soft_wrap=True)
        return
    for regression in found:
        _stdout.print(
            f"REGRESSION ({regression.gate}) {regression.sentence}",
            style="bold red",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    _stdout.print(
        f"exit 18: {len(found)} regression(s) beyond --fail-on {watched}",
        style="bold red",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def trend_command(
    tag_key: Annotated[str, typer.Argument(metavar="TAG", help="tag key the runs share (horde run --tag KEY=VALUE)")],
    value: Annotated[Optional[str], typer.Option("--value", help="only runs whose tag has this value")] = None,
    limit: Annotated[int, typer.Option("--limit", help="at most this many of the newest such runs")] = 20,
    step: Annotated[Optional[str], typer.Option("--step", help="one step's figures (default: all requests)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    store_url: StoreOption = None,
) -> int:
    """Show how p95, req/s and errors moved across runs sharing a tag, oldest first."""
    from horde.results.compare import trend
    from horde.results.stored_run import ALL_REQUESTS
    from horde.store import Store

    if limit < 1:
        raise InvalidInput(f"--limit must be at least 1 (got {limit})")
    with Store.open(store_url) as store:
        points = trend(store, tag_key, tag_value=value, limit=limit)
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "run_id": p.run_id,
                        "started_at": p.started_at.isoformat(),
                        "status": p.status,
                        "tag_value": p.tag_value,
                        "steps": p.steps,
                    }
                    for p in points
                ],
                indent=2,
            )
        )
        return ExitCode.OK
    if not points:
        _stdout.print(f"no stored run has the tag {tag_key!r}", markup=False, highlight=False)
        return ExitCode.OK
    name = step or ALL_REQUESTS
    table = Table(title=f"trend of {name} over runs tagged {tag_key}", title_justify="left", header_style="bold")
    for column in ("run", tag_key, "started (UTC)", "status", "requests", "req/s", "p95 ms", "errors %"):
        table.add_column(column, justify="right" if column in ("requests", "req/s", "p95 ms", "errors %") else "left")
    for point in points:
        figures = point.steps.get(name)
        if figures is None:
            table.add_row(
                point.run_id,
                Text(point.tag_value),
                point.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                point.status,
                "—",
                "—",
                "—",
                "—",
            )
            continue
        table.add_row(
            point.run_id,
            Text(point.tag_value),
            point.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            point.status,
            f"{figures['requests']:,}",
            f"{figures['rps']:,.1f}",
            f"{figures['p95_ms']:.2f}",
            f"{figures['error_percent']:.2f}",
        )
    _stdout.print(table)
    return ExitCode.OK
