"""The live terminal view of a run (a sink): progress, load, latency, errors, generator health.

On a terminal it redraws once a second; elsewhere (CI logs) it prints one line every few
seconds. A target failing every request, or a generator that is itself the bottleneck, is shown
in red, in words, so neither can be missed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from horde.engine import histogram
from horde.results.summary import GENERATOR_SATURATED, GENERATOR_STARVED, generator_state
from horde.engine.snapshot import Snapshot, StepSnapshot
from horde.monitors.diagnosis import format_bytes

#: Lines printed when the output is not a terminal: one every this many seconds.
PLAIN_LINE_EVERY_S = 5


class LiveView:
    """Shows each snapshot as it arrives; use as a context manager around the run."""

    def __init__(
        self,
        console: Console,
        *,
        title: str,
        planned_duration_s: float,
        cpu_limit_percent: float,
        open_ended: bool = False,
    ) -> None:
        """``open_ended``: the run lasts until its steering has an answer (find-max), so
        ``planned_duration_s`` is only its longest and the view shows the steering's progress
        rather than a countdown."""
        self.console = console
        self.title = title
        self.open_ended = open_ended
        self._steering_said: tuple[Any, ...] | None = None
        self.planned_duration_s = planned_duration_s
        self.cpu_limit_percent = cpu_limit_percent
        self.total_requests = 0
        self.total_errors = 0
        self.stopping = False
        self._live: Live | None = None
        #: The last snapshot shown on the terminal's panel (redrawn with "stopping..." at Ctrl-C).
        self._last: Snapshot | None = None
        #: The final snapshot, the drain, once it came: said in words under the last second's panel.
        self._drain: Snapshot | None = None
        self._warned_kinds: set[str] = set()

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            # Redrawn when there is something new (a snapshot, once a second; the stop), not on a
            # timer: rich's auto-refresh redraws the same panel 4 times a second from a thread of
            # its own, CPU taken from the core the engine's worker may share (issue 22).
            self._live = Live(self._render(None), console=self.console, auto_refresh=False, transient=False)
            self._live.__enter__()
        elif self.open_ended:
            self.console.print(
                f"{self.title}: running until find-max has its answer (at most {self.planned_duration_s:g} s)",
                markup=False,
                highlight=False,
            )
        else:
            self.console.print(
                f"{self.title}: running for {self.planned_duration_s:g} s", markup=False, highlight=False
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def note_stopping(self) -> None:
        """Ctrl-C was pressed: say so until the run has drained."""
        self.stopping = True
        if self._live is not None:
            self._live.update(self._render(self._last), refresh=True)
        else:
            self.console.print(
                "stopping: no new iterations; in-flight requests are finishing (Ctrl-C again to stop now)"
            )

    def note(self, message: str) -> None:
        """A line worth keeping above the live panel: autostop fired, steering moved or ended."""
        console = self._live.console if self._live is not None else self.console
        console.print(message, markup=False, highlight=False, soft_wrap=True)

    def update(self, snapshot: Snapshot) -> None:
        requests, errors = _request_counts(snapshot)
        self.total_requests += requests
        self.total_errors += errors
        if self._live is not None:
            if snapshot["final"] and self._last is not None:
                # The final interval is the drain, often a few milliseconds: its rates and its CPU
                # share are no second's (a 4 ms drain reads 18 % CPU where every second read 2 %,
                # and the summary, which leaves it out too, says 2 %). The panel keeps the last
                # full second and says what the drain did.
                self._drain = snapshot
                self._live.update(self._render(self._last), refresh=True)
                return
            self._last = snapshot
            self._live.update(self._render(snapshot), refresh=True)
            return
        steering = snapshot.get("steering")
        if steering is not None and steering.get("method") == "find_max":
            # One line per step judged and per phase: the search's progress, as it goes.
            said = (steering["phase"], steering["step"], steering["level"])
            if said != self._steering_said:
                self._steering_said = said
                self.console.print(
                    f"{snapshot['elapsed_s']:7.1f}s  {steering_text(steering)}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        # A warning that starts between two regular lines gets a line of its own at once:
        # otherwise a short run (or a short bad spell) would never show it.
        kinds = {_warning_kind(warning) for warning in self._warnings(snapshot, requests, errors)}
        new_warning = bool(kinds - self._warned_kinds)
        self._warned_kinds = kinds
        if snapshot["second"] % PLAIN_LINE_EVERY_S == 0 or snapshot["final"] or new_warning:
            self.console.print(
                self._plain_line(snapshot, requests, errors), markup=False, highlight=False, soft_wrap=True
            )

    def _plain_line(self, snapshot: Snapshot, requests: int, errors: int) -> str:
        if snapshot["final"]:
            return f"{snapshot['elapsed_s']:7.1f}s  {drain_text(snapshot)}"
        latency = _latency(snapshot["steps"])
        rate = requests / snapshot["interval_s"] if snapshot["interval_s"] > 0 else 0.0
        line = (
            f"{snapshot['elapsed_s']:7.1f}s  vus {snapshot['active_vus']:>6}  req/s {rate:9.1f}  "
            f"p50 {_ms(latency, 50.0):>7}  p95 {_ms(latency, 95.0):>7}  p99 {_ms(latency, 99.0):>7} ms  "
            f"errors {errors}  cpu {snapshot['cpu_percent']:.0f}%  lateness p99 {snapshot['timer_lateness_p99_ms']:.1f} ms"
        )
        if snapshot.get("monitors"):
            line += f"  | {monitors_line(snapshot)}"
        for warning in self._warnings(snapshot, requests, errors):
            line += f"  !! {warning}"
        return line

    def _warnings(self, snapshot: Snapshot, requests: int, errors: int) -> list[str]:
        warnings = []
        if requests and errors == requests:
            kinds: dict[str, int] = {}
            for step in snapshot["steps"]:
                for kind, count in step["errors"].items():
                    kinds[kind] = kinds.get(kind, 0) + count
            worst = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items(), key=lambda item: -item[1]))
            warnings.append(f"EVERY REQUEST FAILED this second ({worst})")
        state = generator_state(snapshot, self.cpu_limit_percent)
        if not snapshot["final"] and state == GENERATOR_STARVED:
            warnings.append(
                f"generator starved (timers {snapshot['timer_lateness_p99_ms']:.0f} ms late at CPU {snapshot['cpu_percent']:.0f}%: "
                "the machine did not run it)"
            )
        if not snapshot["final"] and state == GENERATOR_SATURATED:
            warnings.append(
                "GENERATOR SATURATED: the load generator itself is a bottleneck "
                f"(CPU {snapshot['cpu_percent']:.0f}%, timer lateness p99 {snapshot['timer_lateness_p99_ms']:.1f} ms); "
                "figures may be distorted"
            )
        if snapshot["dropped_arrivals"]:
            warnings.append(f"{snapshot['dropped_arrivals']} arrivals dropped (all max_vus busy)")
        if snapshot.get("lost_share"):
            warnings.append(f"GENERATORS LOST: {snapshot['lost_share']:.0%} of the load is not being sent")
        return warnings

    def _render(self, snapshot: Snapshot | None) -> Panel:
        if snapshot is None:
            return Panel(Text("starting..."), title=Text(self.title))
        requests, errors = _request_counts(snapshot)
        interval = snapshot["interval_s"] or 1.0
        latency = _latency(snapshot["steps"])
        progress = min(snapshot["elapsed_s"], self.planned_duration_s)
        header = Table.grid(padding=(0, 2))
        stopping = "  stopping..." if self.stopping else ""
        steering = snapshot.get("steering")
        if self.open_ended:
            header.add_row(
                Text(f"{snapshot['elapsed_s']:.0f} s" + stopping),
                Text(steering_text(steering) if steering else "", style="bold"),
            )
        else:
            header.add_row(
                ProgressBar(total=max(self.planned_duration_s, 0.001), completed=progress, width=40),
                Text(f"{snapshot['elapsed_s']:.0f} / {self.planned_duration_s:.0f} s" + stopping),
            )
            if steering:
                header.add_row(Text(""), Text(steering_text(steering), style="bold"))
        figures = Table.grid(padding=(0, 3))
        asked = snapshot["target_rate_per_s"]
        load = (
            f"{snapshot['active_vus']} VUs (asked {snapshot['target_vus']})"
            if asked is None
            else (f"{snapshot['active_vus']} VUs, rate asked {asked:.1f}/s, dropped {snapshot['dropped_arrivals']}")
        )
        figures.add_row("load", load)
        figures.add_row("req/s", f"{requests / interval:,.1f}   (total {self.total_requests:,})")
        figures.add_row(
            "latency",
            f"p50 {_ms(latency, 50.0)}   p95 {_ms(latency, 95.0)}   p99 {_ms(latency, 99.0)} ms   (last second)"
            if latency
            else "-   (no response in the last second: nothing to time)",
        )
        error_share = 100.0 * errors / requests if requests else 0.0
        error_style = "bold red" if errors else "green"
        figures.add_row(
            "errors",
            Text(f"{errors} this second ({error_share:.1f} %), {self.total_errors:,} in total", style=error_style),
        )
        figures.add_row(
            "generator",
            f"CPU {snapshot['cpu_percent']:.0f} %   "
            f"timer lateness p99 {snapshot['timer_lateness_p99_ms']:.1f} ms   "
            + ("(last second, the busiest generator)" if snapshot.get("generators") else "(last second)"),
        )
        if snapshot.get("generators"):
            figures.add_row("generators", generators_line(snapshot))
        if snapshot.get("monitors"):
            figures.add_row("monitors", monitors_line(snapshot))
        steps = Table(box=None, header_style="bold")
        for column in ("step", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors"):
            steps.add_column(column, justify="left" if column == "step" else "right")
        for step in snapshot["steps"]:
            stats = histogram.stats(step["histogram"])
            steps.add_row(
                Text(step["step"]),
                f"{step['requests'] / interval:,.1f}",
                *(f"{stats.percentile(p):.2f}" if stats.count else "-" for p in (50.0, 95.0, 99.0)),
                str(step["requests"] - step["ok"]),
            )
        parts: list[Any] = [header, figures, steps]
        for warning in self._warnings(snapshot, requests, errors):
            parts.append(Text(f"!! {warning}", style="bold white on red"))
        if self._drain is not None:
            parts.append(Text(f"{self._drain['elapsed_s']:.1f} s  {drain_text(self._drain)}"))
        return Panel(Group(*parts), title=Text(self.title))


def drain_text(final: Snapshot) -> str:
    """What the final interval, the drain, did: requests completed and errors, never a rate (it
    is often a few milliseconds long). Requests the grace period's end cut are counted in it too,
    but did not complete.

    >>> drain_text({"interval_s": 0.004, "steps": [{"requests": 3, "ok": 2, "errors": {"cut": 1}}]})
    'finished: 2 request(s) completed while draining (4 ms), 1 cut at the end of the grace period, 1 error(s)'
    """
    requests, errors = _request_counts(final)
    cut = sum(int(step["errors"].get("cut", 0)) for step in final["steps"] if step.get("kind", "request") == "request")
    cut_text = f", {cut} cut at the end of the grace period" if cut else ""
    return (
        f"finished: {requests - cut} request(s) completed while draining "
        f"({final['interval_s'] * 1000:.0f} ms){cut_text}, {errors} error(s)"
    )


def steering_text(status: dict[str, Any]) -> str:
    """Where a steering stands, in one line: find-max's phase, step, level and bracket with its
    last verdict; target response time's level and latency against the target.

    >>> steering_text({"method": "find_max", "phase": "search", "step": 6, "level": 412.0, "level_unit": "rate_per_s",
    ...                "good_level": 400.0, "saturated_level": 800.0, "set_aside_s": 3,
    ...                "last": {"level": 800.0, "verdict": "throughput_flat", "ok_rps": 400.2, "latency_ms": 95.1}})
    'find-max: search, step 6 at 412/s · knee between 400/s and 800/s · last: 800/s throughput_flat (400.2 req/s, p 95.1 ms) · 3 s set aside (generator starved)'
    >>> steering_text({"method": "target_response_time", "phase": "hold", "level": 37.0, "level_unit": "vus",
    ...                "percentile": 95, "target_ms": 3.0, "latency_ms": 2.91, "held": True})
    'target response time: holding at 37 VUs · p95 2.9 ms for 3 ms · held'
    """
    unit = {"vus": " VUs", "pace": "×"}.get(str(status.get("level_unit")), "/s")

    def level(value: float | None) -> str:
        if value is None:
            return "-"
        if unit == "×":
            return f"pace ×{value:.3g}"
        return f"{value:,.0f}{unit}" if value >= 100 else f"{value:,.4g}{unit}"

    if status.get("method") == "target_response_time":
        latency = status.get("latency_ms")
        shown = "-" if latency is None else f"{latency:.1f} ms"
        phases = {
            "climb": "climbing",
            "descend": "descending",
            "bisect": "closing in",
            "hold": "holding",
            "recover": "recovering (the target drains its queue)",
            "drain": "draining",
        }
        text = (
            f"target response time: {phases.get(status['phase'], status['phase'])} at {level(status['level'])} · "
            f"p{status.get('percentile', 95):g} {shown} for {status['target_ms']:g} ms"
            + (" · held" if status.get("held") else "")
        )
    else:
        phases = {"sight": "sighting shot", "recover": "recovering (the target drains its queue)", "done": "done"}
        text = f"find-max: {phases.get(status['phase'], status['phase'])}"
        if status["phase"] not in ("sight", "recover", "done"):
            text += f", step {status['step']} at {level(status['level'])}"
        if status.get("good_level") is not None or status.get("saturated_level") is not None:
            text += f" · knee between {level(status.get('good_level'))} and {level(status.get('saturated_level'))}"
        last = status.get("last")
        if last:
            latency = "" if last.get("latency_ms") is None else f", p {last['latency_ms']:.1f} ms"
            text += f" · last: {level(last['level'])} {last['verdict']} ({last['ok_rps']:,.1f} req/s{latency})"
    if status.get("set_aside_s"):
        text += f" · {status['set_aside_s']} s set aside (generator starved)"
    return text


#: The figures the live view shows of a monitor, the most telling first, when it gave them.
MONITOR_FIGURES: tuple[tuple[str, Callable[[float], str]], ...] = (
    ("cpu.busy_percent", "cpu {:.0f}%".format),
    ("net.rx_bytes_per_s", lambda value: f"rx {format_bytes(value)}/s"),
    ("tcp.time_wait", "tw {:,.0f}".format),
    ("transactions_per_s", "tps {:,.0f}".format),
    ("dead_tuples", "dead {:,.0f}".format),
    ("replication_lag_s", "lag {:.1f}s".format),
    ("connections.total", "conns {:,.0f}".format),
)


def monitors_line(snapshot: Snapshot) -> str:
    """Each monitor's most telling latest figures in one line; a gap says so.

    >>> monitors_line({"monitors": {"db": {"values": {"cpu.busy_percent": 97.2, "transactions_per_s": 812.0}},
    ...                             "pg": {"values": None, "error": "refused"}}})
    'db cpu 97% tps 812 · pg (gap)'
    """
    parts = []
    for name, latest in snapshot.get("monitors", {}).items():
        values = latest.get("values")
        if values is None:
            parts.append(f"{name} (gap)")
            continue
        shown = [form(values[key]) for key, form in MONITOR_FIGURES if key in values][:4]
        parts.append(" ".join([name, *shown]))
    return " · ".join(parts)


def generators_line(snapshot: Snapshot) -> str:
    """A cluster run's generators this second: each one's rate, CPU and lateness, and state
    when it is not running (so a slow or sick generator stands out)."""
    parts = []
    for row in snapshot["generators"]:
        if row["state"] == "lost":
            parts.append(f"#{row['generator']} LOST")
            continue
        cpu = "-" if row["cpu_percent"] is None else f"{row['cpu_percent']:.0f}%"
        lateness = "-" if row["timer_lateness_p99_ms"] is None else f"{row['timer_lateness_p99_ms']:.1f}ms"
        state = "" if row["state"] in ("running", "finished") else f" {row['state'].upper()}"
        parts.append(f"#{row['generator']} {row['rps']:,.0f}/s cpu {cpu} late {lateness}{state}")
    return "   ".join(parts)


def _warning_kind(warning: str) -> str:
    """A warning without its figures: 'EVERY REQUEST FAILED this second', 'arrivals dropped'..."""
    return re.sub(r"[^A-Za-z ]", "", warning.split("(")[0]).strip()


def _latency(steps: list[StepSnapshot]) -> dict[float, float] | None:
    """The requests' latency percentiles, or None when no request got a response (failed
    requests are counted, never timed: a 0.00 would read as a fast target)."""
    blobs = [step["histogram"] for step in steps if step.get("kind", "request") == "request"]
    if not blobs:
        return None
    stats = histogram.stats(histogram.merge(blobs))
    return stats.percentiles_ms if stats.count else None


def _ms(latency: dict[float, float] | None, percentile: float) -> str:
    return "-" if latency is None else f"{latency[percentile]:.2f}"


def _request_counts(snapshot: Snapshot) -> tuple[int, int]:
    """Requests and errors of a snapshot; group entries are passes over requests already counted."""
    entries = [step for step in snapshot["steps"] if step.get("kind", "request") == "request"]
    requests = sum(int(step["requests"]) for step in entries)
    return requests, requests - sum(int(step["ok"]) for step in entries)
