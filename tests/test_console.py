"""What a person reads in a narrow terminal: tables drop their least telling columns rather than
cut a run id, a step name or a verdict in the middle."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from horde.cli.console import Column, fitted_table

RUN_ID = "20261123-234512-ab12cd"
COLUMNS = [
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
ROW = [
    RUN_ID,
    Text("quickstart"),
    "finished",
    "2026-11-23 23:45:12",
    "10.0",
    "12,345",
    "1,234.5",
    "12.34",
    "0.00",
    Text("build=1234 env=ci"),
]


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


STEP_NAMES = ["POST /api/v1/checkout/confirm", "GET /api/v1/catalogue/items", "login", "browse the catalogue page"]


def run_summary() -> dict[str, Any]:
    from horde.results.summary import summarise
    from synthetic import entry

    snapshots = [
        {
            "second": second,
            "elapsed_s": float(second),
            "interval_s": 1.0,
            "timestamp": 0.0,
            "final": second == 3,
            "steps": [
                entry(
                    name,
                    [1000 * (index + 1) + 37 * k for k in range(200)],
                    errors={"status_503": 12} if index == 0 else None,
                )
                for index, name in enumerate(STEP_NAMES)
            ],
            "active_vus": 4,
            "busy_vus": 4,
            "iterations": 200,
            "dropped_arrivals": 0,
            "connections_opened": 4,
            "target_vus": 4,
            "target_rate_per_s": None,
            "cpu_percent": 5.0,
            "timer_lateness_p99_ms": 0.1,
        }
        for second in (1, 2, 3)
    ]
    return summarise(snapshots, run_id=RUN_ID, status="finished", workers=1)


def rendered_summary(width: int) -> str:
    from horde.cli.console import render_summary

    console = Console(width=width, record=True, color_system=None)
    render_summary(console, run_summary())
    return console.export_text()


def test_the_summary_at_80_columns_keeps_step_names_whole_and_the_essential_figures() -> None:
    text = rendered_summary(80)
    table = text.split("errors by kind")[0]
    rows = [line for line in table.splitlines() if line.startswith("│")]
    for name in [*STEP_NAMES, "all requests"]:
        assert sum(name in row for row in rows) == 1, (name, table)  # whole, on one line
    assert "…" not in text
    for column in ("requests", "errors", "req/s", "p95 ms"):
        assert column in table
    assert "36 (6.00 %)" in table and "8.00" in table  # the first step's errors and p95
    assert "left out at 80 columns: p50 ms, p90 ms, p99 ms, max ms" in text
    assert max(len(line) for line in table.splitlines()) <= 80


def test_a_narrower_summary_breaks_names_between_words_never_inside_one() -> None:
    text = rendered_summary(50)
    table = text.split("errors by kind")[0]
    words = {word for line in table.splitlines() for word in line.replace("│", " ").split()}
    for name in STEP_NAMES:
        assert set(name.split()) <= words, name  # "/api/v1/checkout/confirm" whole, if on a line of its own
    assert "p95 ms" in table and "…" not in text
    assert max(len(line) for line in table.splitlines()) <= 50


def test_a_wide_summary_shows_every_column_and_says_nothing_is_left_out() -> None:
    text = rendered_summary(200)
    assert all(column in text for column in ("p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms"))
    assert "left out" not in text
    assert any(STEP_NAMES[0] in line and "8.37" in line for line in text.splitlines())


def test_every_error_kind_the_engine_counts_has_a_hint_that_names_its_cause() -> None:
    # The engine's labels (horde-metrics' ErrorKind::label), read from its source: a kind added
    # there without a hint here fails this test.
    import re
    from pathlib import Path

    from horde.cli.console import error_hint

    source = (Path(__file__).resolve().parents[1] / "crates" / "horde-metrics" / "src" / "error_kind.rs").read_text()
    kinds = set(re.findall(r'ErrorKind::\w+ => "(\w+)"\.into\(\)', source))
    assert {"refused", "lost", "protocol", "sql_login_failed", "ws_closed"} <= kinds
    assert {kind for kind in kinds if error_hint(kind) is None} == set()
    # Each hint names the cause of its own transport: a protocol error is not always HTTP's, a
    # lost ping is a datagram's (TCP is late, not lost), a refused login is the database's.
    assert "target.framing" in str(error_hint("protocol")) and "WebSocket" in str(error_hint("protocol"))
    assert "UDP or KCP" in str(error_hint("lost"))
    assert "timeout_ms" in str(error_hint("timeout", ping=True)) and "late, not lost" in str(
        error_hint("timeout", ping=True)
    )
    assert "request_timeout_ms" in str(error_hint("timeout")) and "ping" not in str(error_hint("timeout"))
    assert "password_env" in str(error_hint("sql_login_failed")) and "pg_hba.conf" in str(
        error_hint("sql_login_failed")
    )


def test_a_ping_timeout_gets_the_ping_hint_and_a_request_timeout_the_requests() -> None:
    from horde.cli.console import render_summary

    summary = run_summary()
    ping, page = summary["steps"][STEP_NAMES[0]], summary["steps"][STEP_NAMES[1]]
    ping["messages"] = {
        "sent": 10,
        "received": 8,
        "datagrams_sent": 0,
        "datagrams_received": 0,
        "late": 2,
        "sent_per_s": 3.3,
        "received_per_s": 2.7,
        "datagrams_sent_per_s": 0.0,
        "datagrams_received_per_s": 0.0,
    }
    ping["errors_by_kind"] = {"timeout": 2}
    summary["errors_by_kind"] = {"timeout": 2}

    def hints() -> list[str]:
        console = Console(width=300, record=True, color_system=None)
        render_summary(console, summary)
        return [line.strip() for line in console.export_text().splitlines() if line.strip().startswith("timeout: ")]

    assert len(hints()) == 1 and "the step's timeout_ms" in hints()[0] and "late, not lost" in hints()[0]
    page["errors_by_kind"] = {"timeout": 3}  # an HTTP step timed out too: both hints, each its own
    summary["errors_by_kind"] = {"timeout": 5}
    shown = hints()
    assert len(shown) == 2 and any("target.request_timeout_ms" in hint for hint in shown)
