"""``horde profile``: a production profile from access logs, and the plan that reproduces it.

``register(app)`` adds the command to the ``horde`` application. It sends no load: it reads the
logs (streaming, with a progress bar on a terminal), prints the profile as a table, and keeps it
as JSON (``--json``), an HTML page (``--html``) and a plan (``--plan``). Errors follow
``horde.cli``'s conventions: a bad flag or a log that cannot be read as its format is an
:class:`~horde.errors.InvalidInput` with a hint, exit code 2.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from horde.cli.arguments import HordeCommand, parse_duration
from horde.errors import ExitCode, InvalidInput
from horde.profile import FORMATS, PlanOptions, Profile, ProfileOptions, ReadCounts, SessionKey, WrittenPlan
from horde.profile import build_profile, write_plan
from horde.profile.kinds import find_kinds
from horde.profile.logs import ROLES
from horde.profile.plan_writer import choose_endpoints

# Off a terminal (CI logs, pipes) rich would wrap at 80 columns; as in horde.cli, lines stay whole.
_stdout = Console() if Console().is_terminal else Console(width=200)
#: Off a terminal, how often a line tells how far the reading is.
PROGRESS_EVERY_S = 10.0
_stderr = Console(stderr=True) if Console(stderr=True).is_terminal else Console(stderr=True, width=200)

PLAN_PANEL = "The plan (--plan)"


def register(app: typer.Typer) -> None:
    """Add ``profile`` to ``app`` (a second call does nothing)."""
    if any(info.name == "profile" for info in app.registered_commands):
        return
    app.command(
        "profile",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde profile access.log --plan plan.yaml --html profile.html\n\n  horde profile api.jsonl.gz --format json --field path=uri --by time --cover 95",
    )(profile)


def _fields(texts: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for text in texts:
        role, separator, name = text.partition("=")
        if not separator or not name or role not in ROLES:
            raise InvalidInput(
                f"--field: {text!r} is not ROLE=NAME",
                hint=f"roles: {', '.join(ROLES)}; e.g. --field path=request_uri --field duration=rt_ms",
            )
        fields[role] = name
    return fields


def _window(text: str) -> tuple[float, float]:
    """``START/LENGTH`` as (Unix seconds, seconds): START in ISO 8601, UTC unless it says."""
    start, separator, length = text.partition("/")
    try:
        when = datetime.fromisoformat(start.strip().replace("Z", "+00:00")) if separator else None
    except ValueError:
        when = None
    if when is None:
        raise InvalidInput(
            f"--window: {text!r} is not START/LENGTH",
            hint="e.g. --window 2024-03-01T11:00/30m (UTC) or 2024-03-01T11:00+01:00/1h",
        )
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp(), parse_duration(length.strip(), flag="--window")


def _output(path: Optional[Path], flag: str) -> Optional[Path]:
    if path is not None and path.is_dir():
        raise InvalidInput(
            f"{flag}: {path} is a directory", hint=f"give a file path, e.g. {flag} profile{path.suffix or '.out'}"
        )
    return path


def _percent(value: float, flag: str, *, low: float, high: float, example: str) -> float:
    if not low <= value <= high:
        raise InvalidInput(
            f"{flag} must be between {low:g} and {high:g} (got {value:g})", hint=f"e.g. {flag} {example}"
        )
    return value


def profile(
    logs: Annotated[
        list[Path], typer.Argument(metavar="LOG...", help="access logs, plain or gzip, read in the order given")
    ],
    log_format: Annotated[str, typer.Option("--format", help=f"log format: {', '.join(FORMATS)}")] = "auto",
    field: Annotated[
        Optional[list[str]],
        typer.Option(
            "--field",
            metavar="ROLE=NAME",
            help=f"JSON logs: the field holding a role ({', '.join(ROLES)}); guessed when not given",
        ),
    ] = None,
    time_unit: Annotated[
        Optional[str], typer.Option("--time-unit", help="unit of a duration whose unit the log does not say: s, ms, us")
    ] = None,
    template: Annotated[
        Optional[list[str]],
        typer.Option(
            "--template",
            metavar="[METHOD] PATH",
            help="an endpoint template, e.g. '/users/{name}/orders' (repeatable; tried before the automatic ones)",
        ),
    ] = None,
    session: Annotated[
        str, typer.Option("--session", help="what tells sessions apart: ip-ua, cookie:NAME or header:NAME")
    ] = "ip-ua",
    session_gap: Annotated[str, typer.Option("--session-gap", help="inactivity that ends a session")] = "30m",
    top: Annotated[int, typer.Option("--top", help="endpoints shown in the table")] = 20,
    json_path: Annotated[Optional[Path], typer.Option("--json", help="write the profile as JSON to this file")] = None,
    html_path: Annotated[
        Optional[Path], typer.Option("--html", help="write the profile as an HTML page to this file")
    ] = None,
    plan_path: Annotated[
        Optional[Path],
        typer.Option("--plan", help="write a plan (YAML) reproducing the profile", rich_help_panel=PLAN_PANEL),
    ] = None,
    base_url: Annotated[
        str, typer.Option("--base-url", help="the plan's target", rich_help_panel=PLAN_PANEL)
    ] = "http://127.0.0.1:8080",
    cover: Annotated[
        float,
        typer.Option("--cover", help="percent of the traffic the plan's endpoints cover", rich_help_panel=PLAN_PANEL),
    ] = 90.0,
    by: Annotated[
        str,
        typer.Option(
            "--by", help="what --cover counts: count or time (count × response time)", rich_help_panel=PLAN_PANEL
        ),
    ] = "count",
    min_share: Annotated[
        float,
        typer.Option(
            "--min-share",
            help="percent: every endpoint at or above it by count or by time is kept too, whatever --cover and --by (0: none)",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = 1.0,
    headroom: Annotated[
        float, typer.Option("--headroom", help="percent added to the peak rate", rich_help_panel=PLAN_PANEL)
    ] = 20.0,
    peak: Annotated[
        str, typer.Option("--peak", help="the peak the rate comes from: minute or hour", rich_help_panel=PLAN_PANEL)
    ] = "minute",
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="open (arrivals at the rate) or users (VUs at the per-user rate)",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = "open",
    duration: Annotated[str, typer.Option("--duration", help="the plan's length", rich_help_panel=PLAN_PANEL)] = "5m",
    ramp_up: Annotated[
        str,
        typer.Option(
            "--ramp-up", help="the first part of --duration, a ramp from 0 (0: none)", rich_help_panel=PLAN_PANEL
        ),
    ] = "1m",
    ids: Annotated[
        str,
        typer.Option(
            "--ids",
            help="ids in paths: seen (inline in the plan) or feeder (a CSV file beside it)",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = "seen",
    window: Annotated[
        Optional[str],
        typer.Option(
            "--window",
            metavar="START/LENGTH",
            help="the rate from this window instead of the peak, e.g. 2024-03-01T11:00/30m (UTC unless the time has an offset)",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = None,
    kinds: Annotated[
        str,
        typer.Option(
            "--kinds",
            help="client kinds as scenarios: auto (sessions grouped by endpoint mix and pace; one scenario unless they separate) or off",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = "auto",
    find_max: Annotated[
        bool,
        typer.Option(
            "--find-max",
            help="the plan steers itself: find-max's stepped ramp sized from the log",
            rich_help_panel=PLAN_PANEL,
        ),
    ] = False,
) -> int:
    """Read access logs into a production profile (mix by count and by time, rates, sessions) and write the plan that reproduces it."""
    options = ProfileOptions(
        format=log_format,
        fields=_fields(field or []),
        time_unit=time_unit,
        session=SessionKey.parse(session),
        session_gap_s=parse_duration(session_gap, flag="--session-gap"),
        templates=tuple(template or ()),
    )
    if top < 1:
        raise InvalidInput(f"--top must be at least 1 (got {top})", hint="e.g. --top 20")
    plan_options = PlanOptions(
        base_url=base_url,
        cover_percent=_percent(cover, "--cover", low=0.1, high=100.0, example="90"),
        by=by,
        min_share_percent=min_share,
        headroom_percent=_percent(headroom, "--headroom", low=0.0, high=10_000.0, example="20"),
        model=model,
        duration_s=parse_duration(duration, flag="--duration"),
        ramp_up_s=0.0 if ramp_up.strip() in ("0", "0s") else parse_duration(ramp_up, flag="--ramp-up"),
        ids=ids,
        peak=peak,
        window=_window(window) if window is not None else None,
        find_max=find_max,
    )
    if plan_options.ramp_up_s >= plan_options.duration_s:
        raise InvalidInput(
            f"--ramp-up ({ramp_up}) must be shorter than --duration ({duration})",
            hint="e.g. --duration 5m --ramp-up 1m",
        )
    plan_options.check_choices()  # a mistyped choice is told before a long log is read
    if kinds not in ("auto", "off"):
        raise InvalidInput(
            f"--kinds: {kinds!r} is neither auto nor off",
            hint="--kinds auto (the default) or --kinds off (one scenario)",
        )
    for path in logs:
        if not path.is_file():
            raise InvalidInput(f"{path}: no such file", hint="give the path of an access log (plain or .gz)")
    outputs = {
        flag: _output(path, flag)
        for flag, path in (("--json", json_path), ("--html", html_path), ("--plan", plan_path))
    }

    result = _read(logs, options)
    if plan_path is not None:
        plan_options.check(result)  # before anything is printed or written
    _show(result, top)
    written = None
    plan_failed: Optional[InvalidInput] = None
    if plan_path is not None:
        try:
            found = None
            if kinds == "auto":
                kept = [
                    stats.name
                    for stats in choose_endpoints(
                        result, plan_options.by, plan_options.cover_percent, plan_options.min_share_percent
                    ).chosen
                ]
                found = find_kinds(result, kept)
            written = write_plan(result, plan_path, plan_options, found)
        except InvalidInput as error:
            # The JSON and the page describe the log, which was read: they are still written
            # (without a plan), then the plan's error is told; the plan itself is not on disk.
            plan_failed = error
    if written is not None:
        _show_plan(written)
    if outputs["--json"] is not None:
        data: dict[str, Any] = result.to_dict()
        data["plan"] = written.to_dict() if written is not None else None
        _write(outputs["--json"], json.dumps(data, indent=2) + "\n", "--json")
        _stdout.print(f"profile written to {outputs['--json']}", markup=False, highlight=False)
    if outputs["--html"] is not None:
        from horde.profile.page import render_page  # the report's machinery, only for --html

        _write(outputs["--html"], render_page(result, written), "--html")
        _stdout.print(
            f"page written to {outputs['--html']} (open it in a browser; it works offline)",
            markup=False,
            highlight=False,
        )
    if plan_failed is not None:
        raise plan_failed
    return ExitCode.OK


def _read(logs: list[Path], options: ProfileOptions) -> Profile:
    """The profile, with a progress bar and the rate on a terminal (a CI log would fill with its
    redraws: off a terminal, a line every PROGRESS_EVERY_S), and one line of figures after."""
    started = time.perf_counter()
    if _stderr.is_terminal:
        columns = (
            TextColumn("reading"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[lines]}"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=_stderr, transient=True) as progress:
            task = progress.add_task("reading", total=None, lines="")

            def on_progress(counts: ReadCounts) -> None:
                elapsed = max(time.perf_counter() - started, 1e-9)
                progress.update(
                    task,
                    completed=counts.bytes_read,
                    total=counts.bytes_total or None,
                    lines=f"{counts.lines:,} lines, {counts.lines / elapsed:,.0f} lines/s",
                )

            result = build_profile(logs, options, on_progress)
    else:
        told = [started]

        def every_few_seconds(counts: ReadCounts) -> None:
            # Off a terminal (a CI log, `2> file`): one line now and then, not a redrawn bar.
            now = time.perf_counter()
            if now - told[0] >= PROGRESS_EVERY_S:
                told[0] = now
                share = (
                    f" ({100 * counts.bytes_read / counts.bytes_total:.0f} % of the bytes)"
                    if counts.bytes_total
                    else ""
                )
                _stderr.print(
                    f"reading: {counts.lines:,} lines{share}, {counts.lines / max(now - started, 1e-9):,.0f} lines/s",
                    markup=False,
                    highlight=False,
                )

        result = build_profile(logs, options, every_few_seconds)
    counts = result.counts
    elapsed = max(result.elapsed_s, 1e-9)
    _stderr.print(
        f"read {counts.lines:,} lines ({counts.records:,} requests, {counts.bad:,} unparsed) in "
        f"{elapsed:.2f} s: {counts.lines / elapsed:,.0f} lines/s",
        markup=False,
        highlight=False,
    )
    return result


def _show(result: Profile, top: int) -> None:
    data = result.to_dict()
    source = data["source"]
    if source["unparsed"]:
        _stderr.print(
            f"warning: {source['unparsed']:,} lines did not parse as {source['format']} and are not counted:",
            markup=False,
            highlight=False,
        )
        for bad in result.counts.bad_samples:
            _stderr.print(
                f"  {bad.source}:{bad.line}: {bad.reason}: {bad.text}", markup=False, highlight=False, soft_wrap=True
            )
    timed = data["overall"] is not None
    table = Table(
        title=f"production profile: {source['requests']:,} requests, {len(data['endpoints'])} endpoints "
        f"({source['format']}, {source['first_minute']} to {source['last_minute']})",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("endpoint", overflow="fold")
    for column in ("requests", "% count", "% time", "p50 ms", "p95 ms", "errors %"):
        table.add_column(column, justify="right")
    table.add_column("statuses")
    for row in data["endpoints"][:top]:
        statuses = sorted(row["statuses"].items(), key=lambda item: -item[1])[:3]
        table.add_row(
            Text(row["endpoint"]),
            f"{row['requests']:,}",
            f"{100 * row['share_by_count']:.2f}",
            f"{100 * row['share_by_time']:.2f}" if timed else "—",
            _ms(row["p50_ms"]),
            _ms(row["p95_ms"]),
            f"{row['error_percent']:.2f}",
            ", ".join(f"{status} {100 * count / row['requests']:.0f}%" for status, count in statuses),
        )
    _stdout.print(table)
    if len(data["endpoints"]) > top:
        _stdout.print(
            f"… and {len(data['endpoints']) - top} more endpoints (--top N shows more; --json keeps them all)",
            markup=False,
            highlight=False,
        )
    rate = data["rate"]
    if rate["peak_minute"]:
        _stdout.print(
            f"rate: mean {rate['mean_per_s']:g} req/s; peak minute {rate['peak_minute']['per_s']:g} req/s "
            f"at {rate['peak_minute']['at']}; peak hour {rate['peak_hour']['per_s']:g} req/s at "
            f"{rate['peak_hour']['at']}{_partial_hour(rate['peak_hour']['minutes'])}; "
            f"peak to mean {rate['peak_to_mean']}",
            markup=False,
            highlight=False,
        )
    sessions = data["sessions"]
    think = sessions["think_time_ms"]
    _stdout.print(
        f"sessions ({sessions['key']}): {sessions['sessions']:,}, {sessions['requests_per_session']['mean']:g} "
        f"requests each on average (p95 {sessions['requests_per_session']['p95']})"
        + (f"; think time mean {think['mean']:g} ms, p50 {think['p50']:g} ms, p95 {think['p95']:g} ms" if think else "")
        + (f"; {sessions['per_user_rate_per_s']:g} req/s per user" if sessions["per_user_rate_per_s"] else ""),
        markup=False,
        highlight=False,
    )
    for move in sessions["top_transitions"][:5]:
        _stdout.print(
            f"  {move['from']} → {move['to']}: {move['count']:,} ({100 * move['share']:.1f} %)",
            markup=False,
            highlight=False,
        )


def _show_plan(written: WrittenPlan) -> None:
    sizing = written.sizing
    time_part = (
        f" and {100 * written.covered_time_share:.1f} % of the time" if written.covered_time_share is not None else ""
    )
    window = "window" if sizing["peak"] == "window" else "peak " + sizing["peak"]
    _stdout.print(
        f"plan written to {written.path}: {len(written.endpoints)} endpoints, {100 * written.covered_share:.1f} % of "
        f"the requests{time_part}, {sizing['rate_per_s']:g} req/s (the {window}'s {sizing['peak_per_s']:g} "
        f"× these endpoints' {100 * sizing['kept_share_in_window']:.1f} % of its requests + {sizing['headroom_percent']:g} %; "
        f"each endpoint's rate from its own requests in the {window} from {sizing['peak_from']}, "
        f"{sizing['peak_minutes']} minute{'' if sizing['peak_minutes'] == 1 else 's'})",
        markup=False,
        highlight=False,
    )
    if written.left_out:
        timed = written.covered_time_share is not None
        shares = ", ".join(
            f"{row['endpoint']} ({100 * row['share_by_count']:.2f} %"
            + (f", {100 * row['share_by_time']:.2f} % of the time)" if timed else ")")
            for row in written.left_out[:5]
        )
        more = f" and {len(written.left_out) - 5} more" if len(written.left_out) > 5 else ""
        _stdout.print(
            f"  left out: {len(written.left_out)} endpoints, {100 * sum(row['share_by_count'] for row in written.left_out):.2f} % "
            "of the requests"
            + (f", {100 * sum(row['share_by_time'] for row in written.left_out):.2f} % of the time" if timed else "")
            + f": {shares}{more}",
            markup=False,
            highlight=False,
        )
    little = sizing["little"]
    if little.get("by_kind"):
        _stdout.print(
            f"  sizing (Little's law, per client kind): {little['vus']} VUs in all", markup=False, highlight=False
        )
    elif little["vus"] is not None:
        _stdout.print(
            f"  sizing (Little's law): {little['rate_per_s']:g} req/s × ({little['mean_ms']:g} ms mean + {little['think_ms']:g} ms "
            f"think) = {little['vus']} VUs",
            markup=False,
            highlight=False,
        )
    found = sizing.get("kinds_found")
    if found is not None and found["kinds"] > 1:
        _stdout.print(
            f"  client kinds: {found['kinds']} scenarios (k-means on {found['sessions']:,} sessions' mix and pace, "
            f"silhouette {found['silhouette']:g}): "
            + "; ".join(
                f"{row['scenario']} {100 * row['share_of_requests']:.1f} % of the requests, {row['vus']} VUs"
                for row in sizing["kinds"]
            ),
            markup=False,
            highlight=False,
        )
    elif found is not None:
        _stdout.print(
            "  client kinds: one (the sessions' mixes and paces do not separate"
            + (f": best silhouette {found['silhouette']:g}" if found["silhouette"] is not None else "")
            + ")",
            markup=False,
            highlight=False,
        )
    for note in written.notes:
        _stdout.print(f"  note: {note}", markup=False, highlight=False)
    _stdout.print(f"  sighting shot: {sizing['sight_command']}", markup=False, highlight=False)
    _stdout.print(f"  find-max:      {sizing['find_max_command']}", markup=False, highlight=False)


def _partial_hour(minutes: int) -> str:
    """What a peak hour the log covers only in part was measured over."""
    return "" if minutes >= 60 else f" (over the {minutes} minute{'' if minutes == 1 else 's'} of it the log covers)"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _write(path: Path, text: str, flag: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise InvalidInput(
            f"cannot write {flag} {path}: {error.strerror or error}", hint=f"give a writable path with {flag}"
        ) from error
