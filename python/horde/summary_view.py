"""The summary printed at the end of a run and by ``horde show``: a table a person reads."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def render_summary(console: Console, summary: dict[str, Any], *, store_url: str | None = None) -> None:
    table = Table(title=f"run {summary['run_id']} — {summary['status']}", title_justify="left", header_style="bold")
    for column in ("step", "requests", "errors", "req/s", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "step" else "right")

    def row(name: str, figures: dict[str, Any], style: str | None = None) -> None:
        latency = figures["latency_ms"]
        errors = f"{figures['errors']:,} ({figures['error_percent']:.2f} %)" if figures["errors"] else "0"
        table.add_row(
            Text(name),  # a step's name is the user's text, never markup
            f"{figures['requests']:,}",
            Text(errors, style="red" if figures["errors"] else ""),
            f"{figures['rps']:,.1f}",
            *(f"{latency[key]:.2f}" for key in ("p50", "p90", "p95", "p99", "max")),
            style=style,
        )

    for name, figures in summary["steps"].items():
        # A group's row is the time of a whole pass through it, not more requests.
        row(f"{name} (group)" if figures.get("kind") == "group" else name, figures, style="italic" if figures.get("kind") == "group" else None)
    row("all requests", summary, style="bold")
    console.print(table)
    kinds = summary.get("errors_by_kind") or {}
    if kinds:
        console.print("errors by kind: " + ", ".join(f"{kind} {count:,}" for kind, count in kinds.items()), style="red", soft_wrap=True)
    generator = summary["generator"]
    line = (
        f"duration {summary['duration_s']:.1f} s · iterations {summary['iterations']:,} · peak VUs {summary['peak_vus']:,} · "
        f"connections {summary['connections_opened']:,} · dropped arrivals {summary['dropped_arrivals']:,} · "
        f"generator CPU max {generator['cpu_percent_max']:.0f} %, timer lateness p99 {generator['timer_lateness_p99_ms']:.1f} ms"
    )
    console.print(line, highlight=False, soft_wrap=True)
    if generator.get("saturated_seconds"):
        console.print(
            f"!! the generator was saturated for {generator['saturated_seconds']} s: latency and rate figures of those seconds "
            "may be the generator's, not the target's",
            style="bold red",
            soft_wrap=True,
        )
    if store_url:
        console.print(f"stored in {store_url} as run {summary['run_id']} (horde show {summary['run_id']})", highlight=False, markup=False, soft_wrap=True)
