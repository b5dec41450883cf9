"""What a person reads in a narrow terminal: tables drop their least telling columns rather than
cut a run id, a step name or a verdict in the middle."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from horde.cli.console import Column, fitted_table

RUN_ID = "20261123-234512-ab12cd"
COLUMNS = [Column("run", 100, "left", keep=True), Column("plan", 80, "left"), Column("status", 90, "left"),
           Column("started (UTC)", 60, "left"), Column("duration s", 40), Column("requests", 70),
           Column("req/s", 50), Column("p95 ms", 55), Column("errors %", 65), Column("tags", 30, "left")]
ROW = [RUN_ID, Text("quickstart"), "finished", "2026-11-23 23:45:12", "10.0", "12,345", "1,234.5", "12.34", "0.00",
       Text("build=1234 env=ci")]


def rendered(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(fitted_table(console, COLUMNS, [ROW]))
    return console.export_text()


def test_at_80_columns_the_run_id_is_whole_and_low_priority_columns_go() -> None:
    text = rendered(80)
    assert RUN_ID in text and "…" not in text
    assert "finished" in text and "quickstart" in text
    assert "tags" not in text and "duration" not in text  # the least telling went first
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_wide_terminal_keeps_every_column() -> None:
    text = rendered(200)
    assert all(column.name in text for column in COLUMNS) and "build=1234 env=ci" in text


def test_kept_columns_stay_even_when_nothing_else_fits() -> None:
    # Narrower than the id itself: every other column has gone, the id's column stays.
    text = rendered(20)
    assert "run" in text and RUN_ID[:15] in text
    assert "plan" not in text and "status" not in text


def test_every_example_in_the_help_parses() -> None:
    # Each command's --help ends with examples; each must name flags the command has. Click
    # parses the whole line before it acts on --help, so an unknown flag fails here.
    import shlex

    from typer.main import get_command

    from horde.cli import app, main

    group: Any = get_command(app)
    examples = []
    for name, command in group.commands.items():
        epilog = command.epilog or ""
        assert epilog.startswith("Examples:"), f"horde {name} --help shows no examples"
        examples += [line.strip() for line in epilog.splitlines() if line.strip().startswith("horde ")]
    assert len(examples) >= 2 * len(group.commands)
    for example in examples:
        assert main([*shlex.split(example)[1:], "--help"]) == 0, example
