"""horde.sinks.live.LiveView: plain lines off a terminal, a redrawn panel on one, and warnings that
cannot be missed (every request failing, a saturated generator, dropped arrivals)."""

from __future__ import annotations

import doctest
import io
import threading
from typing import Any

from rich.console import Console

from horde.sinks.live import PLAIN_LINE_EVERY_S, LiveView, monitors_line
from test_histogram import encode

CPU_LIMIT = 180.0


def step(
    requests: int, ok: int, errors: dict[str, int] | None = None, latency_us: int = 1000, name: str = "home"
) -> dict[str, Any]:
    return {
        "scenario": "s",
        "step": name,
        "requests": requests,
        "ok": ok,
        "errors": errors or {},
        "bytes_sent": 10 * requests,
        "bytes_received": 20 * requests,
        "histogram": encode([latency_us] * requests),
    }


def snap(
    second: int,
    steps: list[dict[str, Any]],
    *,
    final: bool = False,
    cpu: float = 20.0,
    lateness: float = 0.5,
    dropped: int = 0,
    rate: float | None = None,
) -> dict[str, Any]:
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "timestamp": 0.0,
        "final": final,
        "steps": steps,
        "active_vus": 8,
        "busy_vus": 3,
        "iterations": 5,
        "dropped_arrivals": dropped,
        "connections_opened": 0,
        "target_vus": 8,
        "target_rate_per_s": rate,
        "cpu_percent": cpu,
        "timer_lateness_p99_ms": lateness,
    }


def plain_view(title: str = "horde · p · run r") -> tuple[LiveView, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=100)
    assert not console.is_terminal
    return LiveView(console, title=title, planned_duration_s=20, cpu_limit_percent=CPU_LIMIT), out


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_plain_output_is_a_line_every_few_seconds_and_at_the_end() -> None:
    view, out = plain_view()
    with view:
        for second in range(1, 12):
            view.update(snap(second, [step(100, 100)]))
        view.update(snap(12, [step(30, 30)], final=True))
    printed = lines(out)
    assert printed[0] == "horde · p · run r: running for 20 s"
    seconds = [second for second in range(1, 12) if second % PLAIN_LINE_EVERY_S == 0]
    assert len(printed) == 1 + len(seconds) + 1
    assert printed[1].split()[0] == f"{seconds[0]:.1f}s"
    assert "req/s     100.0" in printed[1] and "p50    1.00" in printed[1] and "errors 0" in printed[1]
    assert "!!" not in out.getvalue()
    assert printed[-1].split()[0] == "12.0s"
    assert view.total_requests == 1130 and view.total_errors == 0


def test_every_request_failed_is_shown_at_once_even_between_regular_lines() -> None:
    view, out = plain_view()
    with view:
        view.update(snap(1, [step(10, 0, {"refused": 7, "timeout": 3})]))
        view.update(snap(2, [step(10, 0, {"refused": 10})]))  # same warning again: no extra line
        view.update(snap(3, [step(10, 5, {"refused": 5})]))  # some succeed: no warning
    printed = lines(out)
    assert len(printed) == 2, printed
    assert "!! EVERY REQUEST FAILED this second (refused 7, timeout 3)" in printed[1]
    assert "errors 10" in printed[1]
    assert view.total_errors == 25


def test_generator_saturation_is_a_warning() -> None:
    view, out = plain_view()
    with view:
        view.update(snap(1, [step(10, 10)], cpu=CPU_LIMIT + 5))
        view.update(snap(2, [step(10, 10)]))
        # Timers 25 ms late while the generator used most of its CPU: saturated too.
        view.update(snap(3, [step(10, 10)], lateness=25.0, cpu=0.8 * CPU_LIMIT))
        # Timers 25 ms late at 5 % CPU: the machine did not run it (starved), not saturated.
        view.update(snap(4, [step(10, 10)], lateness=25.0, cpu=5.0))
        view.update(snap(5, [step(1, 1)], cpu=900.0, lateness=99.0, final=True))  # the final drain is noise
    printed = lines(out)
    assert len(printed) == 5, printed
    assert "GENERATOR SATURATED" in printed[1] and "CPU 185%" in printed[1]
    assert "GENERATOR SATURATED" in printed[2] and "timer lateness p99 25.0 ms" in printed[2]
    assert "GENERATOR SATURATED" not in printed[3] and "generator starved (timers 25 ms late at CPU 5%" in printed[3]
    assert "GENERATOR SATURATED" not in printed[4]


def test_dropped_arrivals_are_a_warning() -> None:
    view, out = plain_view()
    with view:
        view.update(snap(1, [step(10, 10)], dropped=42, rate=50.0))
    assert "!! 42 arrivals dropped (all max_vus busy)" in lines(out)[1]


def test_a_healthy_second_has_no_warning_and_an_empty_second_no_figures() -> None:
    view, out = plain_view()
    with view:
        view.update(snap(5, []))
    [_, line] = lines(out)
    assert "!!" not in line
    assert "req/s       0.0" in line and "p99       - ms" in line


def test_stopping_is_said_in_words() -> None:
    view, out = plain_view()
    with view:
        view.note_stopping()
    assert view.stopping
    assert lines(out)[1].startswith("stopping: no new iterations")


def test_user_text_is_never_taken_as_markup() -> None:
    view, out = plain_view(title="horde · [/weird] [bold]name · run r")
    with view:
        view.update(snap(5, [step(1, 1, name="GET /a[/b]")]))
    assert lines(out)[0] == "horde · [/weird] [bold]name · run r: running for 20 s"


def test_terminal_panel_shows_figures_steps_and_warnings() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    view = LiveView(console, title="horde · [/p] · run r", planned_duration_s=10, cpu_limit_percent=CPU_LIMIT)
    with view:
        view.update(
            snap(1, [step(50, 0, {"status_503": 50}, name="GET /x[/y]")], dropped=3, rate=60.0, cpu=CPU_LIMIT * 2)
        )
        view.note_stopping()
        view.update(
            snap(2, [step(50, 0, {"status_503": 50}, name="GET /x[/y]")], dropped=3, rate=60.0, cpu=CPU_LIMIT * 2)
        )
    text = out.getvalue()
    for expected in (
        "horde · [/p] · run r",
        "GET /x[/y]",
        "EVERY REQUEST FAILED this second (status_503 50)",
        "GENERATOR SATURATED",
        "3 arrivals dropped",
        "rate asked 60.0/s",
        "stopping...",
        "100 in total",
    ):
        assert expected in text, expected


def test_a_second_without_a_response_shows_no_latency_rather_than_zero() -> None:
    # Refused requests are counted, never timed: their histogram is empty.
    refused = {**step(10, 0, {"refused": 10}), "histogram": encode([])}
    view, out = plain_view()
    with view:
        view.update(snap(1, [refused]))
    line = lines(out)[1]
    assert "p50       -  p95       -  p99       - ms" in line and "0.00" not in line
    panel = io.StringIO()
    terminal = LiveView(
        Console(file=panel, width=120, force_terminal=True, color_system=None),
        title="t",
        planned_duration_s=20,
        cpu_limit_percent=CPU_LIMIT,
    )
    with terminal:
        terminal.update(snap(1, [refused]))
        terminal.update(snap(2, [refused]))
    assert "no response in the last second" in panel.getvalue() and "0.00" not in panel.getvalue()


def test_terminal_panel_is_redrawn_per_snapshot_not_on_a_timer() -> None:
    # rich's auto-refresh would redraw the same panel 4 times a second from a thread of its own,
    # CPU taken from the core the engine's worker may share (issue 22): the panel is redrawn when
    # a snapshot comes, and when the stop is noted (so "stopping..." shows at once).
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    view = LiveView(console, title="horde · p · run r", planned_duration_s=10, cpu_limit_percent=CPU_LIMIT)
    with view:
        assert not [thread for thread in threading.enumerate() if type(thread).__name__ == "_RefreshThread"]
        view.update(snap(1, [step(50, 0, name="GET /x")]))
        assert "GET /x" in out.getvalue()
        view.note_stopping()
        assert "stopping..." in out.getvalue()


def test_monitors_are_one_line_of_their_most_telling_figures_and_a_gap_says_so() -> None:
    host = {
        "second": 5,
        "error": None,
        "values": {
            "load.1m": 3.5,
            "tcp.time_wait": 12_345.0,
            "cpu.busy_percent": 97.4,
            "net.rx_bytes_per_s": 5_240_000.0,
            "connections.total": 80.0,
            "memory.used_percent": 40.0,
        },
    }
    database = {
        "second": 5,
        "error": None,
        "values": {
            "transactions_per_s": 812.4,
            "dead_tuples": 150_000.0,
            "replication_lag_s": 2.25,
            "connections.total": 28.0,
        },
    }
    gone = {"second": 5, "values": None, "error": "cannot scrape http://10.0.0.5:9100/metrics: refused"}
    snapshot = {**snap(5, [step(100, 100)]), "monitors": {"gen": host, "db": database, "node": gone}}
    expected = "gen cpu 97% rx 5.2 MB/s tw 12,345 conns 80 · db tps 812 dead 150,000 lag 2.2s conns 28 · node (gap)"
    assert monitors_line(snapshot) == expected  # type: ignore[arg-type]
    runner = doctest.DocTestRunner()
    for example in doctest.DocTestFinder().find(monitors_line, globs={"monitors_line": monitors_line}):
        runner.run(example)
    assert runner.summarize(verbose=False) == (0, 1)  # its docstring's example, the (gap) form, holds
    # Off a terminal: at the end of the regular line; on one: the panel's "monitors" row.
    view, out = plain_view()
    with view:
        for second in range(1, 5):
            view.update(snap(second, [step(100, 100)]))
        view.update(snapshot)
    (line,) = lines(out)[1:]
    assert line.startswith("    5.0s") and line.endswith(f"  | {expected}")
    panel = io.StringIO()
    terminal = LiveView(
        Console(file=panel, width=160, force_terminal=True, color_system=None),
        title="t",
        planned_duration_s=20,
        cpu_limit_percent=CPU_LIMIT,
    )
    with terminal:
        terminal.update(snapshot)
    row = next(text for text in panel.getvalue().splitlines() if "monitors" in text)
    assert row.split("monitors", 1)[1].strip().rstrip("│").strip() == expected
    # A run without monitors shows no such line.
    view, out = plain_view()
    with view:
        view.update(snap(5, [step(100, 100)]))
    assert "|" not in lines(out)[1]


def test_the_last_frame_and_the_summary_say_the_same_cpu() -> None:
    # The final interval is the drain, a few milliseconds: the engine's CPU share over it is no
    # second's (18 % over 4 ms where each second read 2 %). The summary leaves it out; so does
    # the panel, which keeps the last full second and says what the drain did.
    from horde.cli.console import render_summary
    from horde.results.summary import summarise

    seconds = [snap(second, [step(100, 100)], cpu=2.0) for second in (1, 2, 3)]
    drain = {**snap(4, [step(3, 2, {"cut": 1})], final=True, cpu=35.0), "interval_s": 0.004, "elapsed_s": 3.004}
    said = "finished: 2 request(s) completed while draining (4 ms), 1 cut at the end of the grace period"
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=140, color_system=None)
    with LiveView(console, title="horde · p", planned_duration_s=3, cpu_limit_percent=CPU_LIMIT) as view:
        for snapshot in [*seconds, drain]:
            view.update(snapshot)
    last_frame = out.getvalue().rsplit("horde · p", 1)[1]
    assert "CPU 2 %" in last_frame and "(last second)" in last_frame and "CPU 35" not in last_frame
    assert said in last_frame
    assert "100.0   (total 303)" in last_frame  # the last second's rate, every request in the total
    summary = summarise(
        [*seconds, drain],
        run_id="r",
        status="finished",  # type: ignore[list-item]
        workers=1,
    )
    assert summary["generator"]["cpu_percent_max"] == 2.0
    printed = Console(width=200, record=True, color_system=None)
    render_summary(printed, summary)
    assert "generator CPU max 2 % (its busiest second)" in printed.export_text()
    # Off a terminal the drain's line has no CPU figure at all.
    view, plain = plain_view()
    with view:
        for snapshot in [*seconds, drain]:
            view.update(snapshot)
    assert lines(plain)[-1] == f"    3.0s  {said}, 1 error(s)"
