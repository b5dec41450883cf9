"""What a person reads in the terminal: the summary printed at the end of a run and by ``horde show``
(with its thresholds' verdicts, sighting shot, capacity and scalability blocks), and the comparison
of two runs printed by ``horde compare``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from horde.control.measure import Scope, format_value, unit_of
from horde.plan.control import parse_condition
from horde.plan.monitors import is_monitor_condition, parse_monitor_condition
from horde.report.capacity_view import capacity_steps
from horde.results.compare import RunComparison, StepComparison
from horde.results.stored_run import ALL_REQUESTS
from horde.results.littles_law import littles_law_warning
from horde.results.summary import Summary, nothing_completed


#: What each error kind usually means, and what to do (docs/troubleshooting.md says more).
ERROR_HINTS = {
    "refused": "nothing listens at the target's address and port: is it running, and is base_url right?",
    "reset": "the target closed connections mid-exchange: a crash, a proxy's limit, or a keep-alive timeout shorter than the run's pauses",
    "timeout": "no whole response within target.request_timeout_ms (or no connection within connect_timeout_ms): the target is saturated or stalled",
    "tls": "the TLS handshake failed (the reason is above): a private CA's certificate needs target.ca_file (a PEM file of the CA); "
    "a self-signed test server --insecure (target.insecure: true)",
    "dns": "the target's host name did not resolve: check base_url's host and this machine's resolver",
    "connect": "the connection could not be opened (an address not available, a source address not bound): check the addresses",
    "no_route": "no route to the target's host or network (EHOSTUNREACH 113, ENETUNREACH 101): check routes, firewalls and that the host is up",
    "lost": "a UDP or KCP ping's reply did not come within its timeout_ms: its datagrams were lost on the way (or the gateway "
    "dropped them); late ones are counted apart",
    "protocol": "the answer did not follow its protocol (HTTP/1.1, a WebSocket's frames, or target.framing for tcp://): the "
    "detail above says which; for HTTP, a TLS port reached with http:// or a server that is not HTTP",
    "headers_too_large": "the response's head passed target.max_response_header_bytes (256 KiB by default): raise it if the target really sends that much",
    "body_too_large": "a check or extractor needed a body longer than target.max_kept_body_bytes (1 MiB by default): raise it, or check something smaller",
    "cut": "requests were still waiting for an answer when the grace period ended: the target stalled, or graceful_stop_s is shorter than its responses",
    "io": "an input/output error on the connection: see the operating system's message in the run's output",
    "check_failed": "a check of the plan failed on the response: compare what the step expects with what the target sends",
    "extract_failed": "an extractor found nothing and has no default: later steps using its variable fail as template_failed",
    "template_failed": "a template could not be rendered: usually a variable a failed extraction left unset",
    "feeder_exhausted": "a unique feeder ran out of rows: add rows, or use mode circular or random",
    "step_failed": "a pass of a group in which some step failed: see that step's own errors",
    "sql_serialization_failure": "SQLSTATE 40001: serializable transactions conflicted; the application would retry them",
    "sql_deadlock": "SQLSTATE 40P01: transactions locked rows in different orders; lock in one order",
    "sql_unique_violation": "SQLSTATE 23505: an insert repeated a key; draw keys from a unique feeder or a sequence",
    "sql_login_failed": "the database refused the login (the SQLSTATE above): check the password target.password_env gives, the "
    "user and database in base_url, and the server's pg_hba.conf",
    "sql_connection_failure": "the database closed or refused the connection (a terminated backend, a restart, "
    "max_connections): see the server's log; the next step connects again",
    "sql_other": "the database reported another error (a syntax error, a missing table...): run the step's query in psql",
    "h2_goaway": "the server ended the HTTP/2 connection (GOAWAY) before responses ended: a restart or its connection limit",
    "h2_refused": "target.http_version is '2' but the TLS server did not choose h2: it speaks HTTP/1.1 only; use 'auto' or '1.1'",
    "ws_closed": "the server closed the WebSocket with a close frame (its code and reason are above) while a step still waited on it; "
    "the next message step connects again",
}


#: The hint for ``timeout`` counted by a message step (tcp://, ws://): a ping whose reply did not
#: come within the step's own timeout_ms, which a stream delivers late rather than loses.
PING_TIMEOUT_HINT = (
    "a ping's reply over TCP or a WebSocket did not come within the step's timeout_ms: late, not lost (a "
    "stream loses nothing; a reply that comes later is counted late): the peer is slow or stalled, or "
    "timeout_ms is shorter than its replies"
)


def error_hint(kind: str, *, ping: bool = False) -> str | None:
    """The hint shown under a run's errors for ``kind`` (``status_503`` by its class); ``ping``:
    counted by a message step, whose timeout is its ping's.

    >>> error_hint("timeout", ping=True) == PING_TIMEOUT_HINT, "ping" in str(error_hint("timeout"))
    (True, False)
    """
    if kind == "timeout" and ping:
        return PING_TIMEOUT_HINT
    if kind.startswith("h2_reset_"):
        return (
            "the server reset HTTP/2 streams with that code (refused_stream: too many at once; enhance_your_calm: "
            "too fast): the server's stream and rate limits, or its logs"
        )
    if kind.startswith("status_"):
        code = kind.removeprefix("status_")
        if code.startswith("5"):
            return "the target answered with a server error: its own logs say why (overload shows as 503)"
        if code in ("401", "403"):
            return "the target refused the credentials: check the plan's headers and the token's parameter"
        if code == "429":
            return "the target is rate limiting: the load passed its limit"
        return "the target refused the request: check the step's method, path and body"
    return ERROR_HINTS.get(kind)


def _hints_of(kind: str, steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The hints for ``kind`` in a run of ``steps``: a timeout counted by message steps (those
    with message counts) gets the ping's hint, one counted by other steps the request's; both
    where both counted it.

    >>> _hints_of("timeout", {"rtt": {"messages": {"sent": 1}, "errors_by_kind": {"timeout": 2}}}) == [PING_TIMEOUT_HINT]
    True
    """
    counted_by = [figures for figures in steps.values() if (figures.get("errors_by_kind") or {}).get(kind)]
    pings = {bool(figures.get("messages")) for figures in counted_by} or {False}
    hints = [error_hint(kind, ping=ping) for ping in sorted(pings)]
    return [hint for hint in hints if hint]


def render_summary(console: Console, summary: Summary, *, store_url: str | None = None) -> None:
    # First, above the table: a run whose table looks calm may have done nothing at all.
    completed = nothing_completed(summary)
    if completed:
        console.print(f"!! {completed}", style="bold red", markup=False, highlight=False, soft_wrap=True)
    rows: list[list[Any]] = []
    styles: list[str | None] = []

    def row(name: str, figures: Mapping[str, Any], style: str | None = None) -> None:
        latency = figures["latency_ms"]
        errors = f"{figures['errors']:,} ({figures['error_percent']:.2f} %)" if figures["errors"] else "0"
        # Not one response: no latency was measured (a 0.00 would read as a fast target).
        timed = figures.get("responses") != 0 or not figures["requests"]
        rows.append(
            [
                Text(name),  # a step's name is the user's text, never markup
                f"{figures['requests']:,}",
                Text(errors, style="red" if figures["errors"] else ""),
                f"{figures['rps']:,.1f}",
                *(f"{latency[key]:.2f}" if timed else "-" for key in ("p50", "p90", "p95", "p99", "max")),
            ]
        )
        styles.append(style)

    for name, figures in summary["steps"].items():
        # A group's row is the time of a whole pass through it, not more requests.
        row(
            f"{name} (group)" if figures.get("kind") == "group" else name,
            figures,
            style="italic" if figures.get("kind") == "group" else None,
        )
    row("all requests", summary, style="bold")
    table = fitted_table(
        console,
        SUMMARY_COLUMNS,
        rows,
        styles,
        essential_priority=ESSENTIAL_SUMMARY_PRIORITY,
        title=f"run {summary['run_id']} — {summary['status']}",
        title_justify="left",
    )
    console.print(table)
    shown = {str(column.header) for column in table.columns}
    left_out = [column.name for column in SUMMARY_COLUMNS if column.name not in shown]
    if left_out:
        console.print(
            f"left out at {console.width} columns: {', '.join(left_out)} (horde show RUN --json has every figure)",
            style="dim",
            markup=False,
            highlight=False,
        )
    with_rows = [(name, figures) for name, figures in summary["steps"].items() if figures.get("rows")]
    if with_rows:
        console.print(
            "rows returned or changed: "
            + ", ".join(f"{name} {figures['rows']:,} ({figures['rows_per_s']:,.1f}/s)" for name, figures in with_rows),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    by_protocol = [
        (name, figures) for name, figures in summary["steps"].items() if figures.get("http1") or figures.get("http2")
    ]
    if by_protocol:
        console.print(
            "requests by protocol: "
            + ", ".join(
                f"{name} {figures.get('http2', 0):,} over HTTP/2, {figures.get('http1', 0):,} over HTTP/1.1"
                for name, figures in by_protocol
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    stalled = [(name, figures["h2_stalls"]) for name, figures in summary["steps"].items() if figures.get("h2_stalls")]
    if stalled:
        console.print(
            "HTTP/2 bodies held back over 100 ms by the server's flow-control window: "
            + ", ".join(f"{name} {count:,}" for name, count in stalled),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    kinds = summary.get("errors_by_kind") or {}
    responses = summary.get("responses")
    if responses is not None and responses < summary["requests"]:
        console.print(
            f"latency covers the {responses:,} requests that got a response; "
            f"{summary['requests'] - responses:,} got none (counted above, not timed)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if kinds:
        console.print(
            "errors by kind: " + ", ".join(f"{kind} {count:,}" for kind, count in kinds.items()),
            style="red",
            soft_wrap=True,
        )
        render_error_details(console, summary.get("error_details") or [])
        for kind in sorted(kinds, key=lambda k: -kinds[k])[:4]:
            for hint in _hints_of(kind, summary["steps"]):
                console.print(f"  {kind}: {hint}", markup=False, highlight=False, soft_wrap=True)
    render_checks(console, summary.get("checks") or [])
    render_messages(console, summary["steps"])
    if summary.get("setup_failures"):
        console.print(
            f"!  setup failed for {summary['setup_failures']:,} VUs (each such iteration ended at its failed "
            "setup step; the VU tried its setup again at its next iteration)",
            style="yellow",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    generator = summary["generator"]
    line = (
        f"duration {summary['duration_s']:.1f} s · iterations {summary['iterations']:,} · peak VUs {summary['peak_vus']:,} · "
        f"connections {summary['connections_opened']:,} · dropped arrivals {summary['dropped_arrivals']:,} · "
        f"generator CPU max {generator['cpu_percent_max']:.0f} % (its busiest second), "
        f"timer lateness p99 {generator['timer_lateness_p99_ms']:.1f} ms"
    )
    console.print(line, highlight=False, soft_wrap=True)
    if generator.get("saturated_seconds"):
        console.print(
            f"!! the generator was saturated for {generator['saturated_seconds']} s: latency and rate figures of those seconds "
            "may be the generator's, not the target's",
            style="bold red",
            soft_wrap=True,
        )
    if generator.get("starved_seconds"):
        console.print(
            f"!  the generator was starved for {generator['starved_seconds']} s (its timers ran late with little CPU used: "
            f"the machine did not schedule it; steal up to {generator.get('steal_percent_max', 0):.1f} %, "
            f"waited for a CPU up to {generator.get('run_delay_ms_max', 0):.0f} ms a second): latency of those seconds may "
            "carry the machine's delays",
            style="yellow",
            soft_wrap=True,
        )
    littles_law = littles_law_warning(summary)
    if littles_law is not None:
        console.print(f"!  {littles_law}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if summary.get("connect_backoffs"):
        console.print(
            f"!  connects failed: VUs paused {summary['connect_backoffs']:,} times before trying again "
            f"({summary.get('connect_backoff_s', 0):,.1f} s in all; target.connect_backoff)",
            style="yellow",
            soft_wrap=True,
        )
    if store_url:
        console.print(
            f"stored in {store_url} as run {summary['run_id']} (horde show {summary['run_id']})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def message_lines(steps: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per message step (``tcp://``, ``udp://``): messages and datagrams a second, late replies.

    >>> message_lines({"rtt": {"messages": {"sent": 100, "received": 98, "datagrams_sent": 90,
    ...     "datagrams_received": 80, "late": 2, "sent_per_s": 10.0, "received_per_s": 9.8,
    ...     "datagrams_sent_per_s": 9.0, "datagrams_received_per_s": 8.0}}, "home": {}})
    ['rtt: sent 100 (10.0/s), received 98 (9.8/s) · datagrams out 90 (9.0/s), in 80 (8.0/s) · late replies 2']
    """
    lines = []
    for name, figures in steps.items():
        counts = figures.get("messages")
        if not counts:
            continue
        line = (
            f"{name}: sent {counts['sent']:,} ({counts['sent_per_s']:,.1f}/s), "
            f"received {counts['received']:,} ({counts['received_per_s']:,.1f}/s)"
        )
        if counts["datagrams_sent"] or counts["datagrams_received"]:
            line += (
                f" · datagrams out {counts['datagrams_sent']:,} ({counts['datagrams_sent_per_s']:,.1f}/s), "
                f"in {counts['datagrams_received']:,} ({counts['datagrams_received_per_s']:,.1f}/s)"
            )
        if counts["late"]:
            line += f" · late replies {counts['late']:,}"
        if counts.get("retransmitted"):
            line += f" · KCP resent {counts['retransmitted']:,}"
        lines.append(line)
    return lines


def render_messages(console: Console, steps: Mapping[str, Mapping[str, Any]]) -> None:
    """The message steps' traffic, under the table (their latency is in it: a ping's is its RTT)."""
    lines = message_lines(steps)
    if lines:
        console.print("messages:", style="bold", highlight=False)
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


#: The most error messages the console summary lists (the stored summary keeps more).
SHOWN_ERROR_DETAILS = 8


def error_detail_lines(details: Sequence[Mapping[str, Any]], limit: int = SHOWN_ERROR_DETAILS) -> list[str]:
    """One line per distinct error message, commonest first.

    >>> error_detail_lines([{"kind": "refused", "message": "Connection refused (os error 111) to 127.0.0.1:1", "count": 100}])
    ['refused: Connection refused (os error 111) to 127.0.0.1:1 — 100']
    """
    ordered = sorted(details, key=lambda detail: (-int(detail["count"]), str(detail["kind"])))
    lines = [f"{detail['kind']}: {detail['message']} — {int(detail['count']):,}" for detail in ordered[:limit]]
    if len(ordered) > limit:
        lines.append(f"... {len(ordered) - limit} more messages (horde export, the report)")
    return lines


def render_error_details(console: Console, details: Sequence[Mapping[str, Any]]) -> None:
    for line in error_detail_lines(details):
        console.print("  " + line, markup=False, highlight=False, soft_wrap=True)


def check_lines(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """k6's list: each check by its step, ✓ when it always passed, ✗ with its failures.

    >>> check_lines([{"step": "login", "check": "status in [200]", "passes": 9, "failures": 1, "pass_percent": 90.0}])
    ['✗ login: status in [200] — 90.00 % passed (9 ✓ / 1 ✗)']
    """
    return [
        f"{'✗' if check['failures'] else '✓'} {check['step']}: {check['check']} — "
        f"{float(check['pass_percent']):.2f} % passed ({int(check['passes']):,} ✓ / {int(check['failures']):,} ✗)"
        for check in checks
    ]


def render_checks(console: Console, checks: Sequence[Mapping[str, Any]]) -> None:
    if checks:
        console.print("checks", style="bold")
    for line, check in zip(check_lines(checks), checks):
        console.print(
            "  " + line, style="red" if check["failures"] else "green", markup=False, highlight=False, soft_wrap=True
        )


def render_judgement(console: Console, summary: Summary) -> None:
    """What was judged at the end of the run: thresholds, autostop, capacity (when present)."""
    render_verdicts(console, summary.get("thresholds") or [])
    autostop = summary.get("autostop")
    if autostop:
        console.print(f"!! {autostop['message']}", style="bold red", markup=False, highlight=False, soft_wrap=True)
    capacity = summary.get("capacity")
    if capacity:
        _render_capacity(console, capacity)
    monitors = summary.get("monitors")
    if monitors:
        _render_monitors(console, monitors)


def _render_monitors(console: Console, monitors: Mapping[str, Any]) -> None:
    """One line per monitor (samples, gaps, its headline figures' mean and peak), then the
    diagnosis: a sentence per rule that fired, with the second it started."""
    for name, source in monitors.get("sources", {}).items():
        figures = "  ".join(
            f"{metric} {entry['mean']:,.4g} (max {entry['max']:,.4g})"
            for metric, entry in list(source.get("figures", {}).items())[:5]
        )
        gaps = f", {source['gaps']} gaps ({source['first_gap']['reason']})" if source.get("gaps") else ""
        console.print(
            f"monitor {name} ({source['type']}): {source['samples']} samples{gaps}  {figures}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for finding in monitors.get("diagnosis", []):
        console.print(
            f"diagnosis: {finding['message']}", style="bold yellow", markup=False, highlight=False, soft_wrap=True
        )


#: The most of a target-response-time run's readings the terminal lists (the latest); the
#: report and `horde show --json` have them all.
MAX_READINGS_SHOWN = 30


def _capacity_question_lines(capacity: Mapping[str, Any]) -> list[str]:
    """The answers to the capacity question asked with the run (users, instances), in the rate's
    own unit (messages/s for a gateway, req/s otherwise)."""
    rate_unit = "messages/s" if capacity.get("rate_unit") == "messages/s" else "req/s"
    lines = []
    if capacity.get("users_supported") is not None:
        lines.append(
            f"users supported at {capacity['per_user_rate']:g} {rate_unit} each: {capacity['users_supported']:,}"
        )
    if capacity.get("instances_needed") is not None:
        lines.append(
            f"instances for a peak of {capacity['peak_rps']:,.1f} {rate_unit} with "
            f"{capacity['headroom_percent']:g} % headroom: {capacity['instances_needed']}"
            + (f" ({capacity['instances_model']})" if capacity.get("instances_model") else "")
        )
    return lines


def _knee_lines(why: Mapping[str, Any] | None) -> list[str]:
    """Find-max's knee by the utilization law: the answer, then each other candidate with its
    figures (the first is the answer's)."""
    if not why:
        return []
    lines = [f"why the knee is there: {why['sentence']}"]
    lines.extend(f"  also: {candidate['phrase']}" for candidate in why.get("candidates", [])[1:])
    return lines


def _render_target_response_time(console: Console, capacity: Mapping[str, Any]) -> None:
    """Target response time: its answer in one sentence (never "max sustainable" when T was
    not held), how long it took and held, then its readings."""
    lines = [str(capacity["sentence"])]
    # Runs stored before the window was recorded judged "held" over 20 s.
    window_s = capacity.get("held_window_s", 20)
    if capacity.get("converged_after_s") is not None:
        lines.append(
            f"converged after {capacity['converged_after_s']} s; held {capacity['held_s']} of "
            f"{capacity['tracked_s']} s since ({capacity['held_percent']:g} %: the p{capacity['percentile']:g} "
            f"over the {window_s} s ending each second within ±10 % of {capacity['target_ms']:g} ms)"
        )
    broke = capacity.get("what_broke_first")
    if broke:
        lines.append(f"what broke first: {broke['sentence']}")
    lines.extend(_capacity_question_lines(capacity))
    lines.extend(f"note: {note}" for note in capacity.get("notes") or [])
    console.print("capacity (target response time)", style="bold")
    for line in lines:
        console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
    readings = capacity.get("readings") or []
    if not readings:
        return
    unit = {"vus": " VUs", "rate_per_s": "/s", "pace": "×"}.get(str(capacity.get("level_unit")), "")
    table = Table(header_style="bold", box=None, padding=(0, 1))
    percentile = f"p{capacity.get('percentile', 95):g} ms"
    for column in ("second", "phase", "level", "verdict", "ok req/s", percentile, "interval", "samples"):
        table.add_column(column, justify="left" if column in ("phase", "verdict", "interval") else "right")
    for reading in readings[-MAX_READINGS_SHOWN:]:
        latency = reading.get("latency_ms")
        low, high = reading.get("low_ms"), reading.get("high_ms")
        interval = "-" if low is None or high is None or high == float("inf") else f"{low:,.2f}–{high:,.2f}"
        table.add_row(
            str(reading["judged_at_s"]),
            reading["phase"],
            f"{reading['level']:,.4g}{unit}",
            reading["verdict"] + (" (estimate)" if reading.get("basis") == "estimate" else ""),
            f"{reading['ok_rps']:,.1f}",
            "-" if latency is None else f"{latency:,.2f}",
            interval,
            f"{reading['samples']:,}",
        )
    if len(readings) > MAX_READINGS_SHOWN:
        console.print(f"  the last {MAX_READINGS_SHOWN} of {len(readings)} readings:", markup=False, highlight=False)
    console.print(table)


def _render_capacity(console: Console, capacity: Mapping[str, Any]) -> None:
    if capacity.get("method") == "target_response_time":
        _render_target_response_time(console, capacity)
        return
    lines = []
    unit = "VUs" if capacity.get("level_unit") == "vus" else "arrivals/s"
    percentile = f"p{capacity.get('percentile', 95):g}"
    if capacity.get("max_rps") is not None:
        line = f"max sustainable: {capacity['max_rps']:,.1f} req/s"
        if capacity.get("latency_ms_at_max") is not None:
            line += f" at {percentile} {capacity['latency_ms_at_max']:,.2f} ms"
        if capacity.get("level_at_max") is not None:
            line += f" (level {capacity['level_at_max']:,.6g} {unit})"
        lines.append(line)
        if capacity.get("max_messages_per_s") is not None:
            lines.append(f"messages at that level: {capacity['max_messages_per_s']:,.1f}/s, sent and received")
    else:
        lines.append("no level held: no maximum found")
    first = capacity.get("first_saturated_step")
    if first:
        lines.append(
            f"saturation: {capacity['saturation_reason']} first at step {first['index'] + 1} "
            f"(level {first['level']:,.6g} {unit}: {first['ok_rps']:,.1f} req/s, "
            f"{percentile} {first['latency_ms'] or 0:,.2f} ms, errors {first['error_percent']:.2f} %)"
        )
    elif capacity.get("method") == "find_max":
        lines.append(f"no saturation found ({capacity.get('ended_because')}): the maximum is at least this")
    broke = capacity.get("what_broke_first")
    if broke:
        lines.append(f"what broke first: {broke['sentence']}")
        lines.extend(_knee_lines(broke.get("why_the_knee")))
    lines.extend(_capacity_question_lines(capacity))
    if capacity.get("bracket_percent") is not None and capacity.get("method") == "find_max":
        lines.append(
            f"the knee lies within {capacity['bracket_percent']:g} % above it "
            f"(found in {capacity.get('answer_after_s')} s, {len(capacity.get('steps') or [])} steps)"
        )
    lines.extend(f"note: {note}" for note in capacity.get("notes") or [])
    console.print("capacity", style="bold")
    for line in lines:
        console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
    if capacity.get("steps"):
        table = Table(header_style="bold", box=None, padding=(0, 1))
        columns = (
            "step",
            "phase",
            "level",
            "verdict",
            "ok req/s",
            "latency ms (from send)",
            "latency ms (as felt)",
            "samples",
            "set aside s",
        )
        for column in columns:
            table.add_column(column, justify="left" if column in ("phase", "verdict") else "right")
        for row in capacity_steps(capacity):
            table.add_row(
                *(
                    Text(
                        "-"
                        if row[column] is None
                        else f"{row[column]:,}"
                        if isinstance(row[column], (int, float))
                        else str(row[column])
                    )
                    for column in columns
                )
            )
        console.print(table)


def render_sight(console: Console, report: Mapping[str, Any]) -> None:
    """The sighting shot: each step's unloaded latency and the ramp to start from."""
    table = Table(
        title=f"sighting shot — one VU per scenario for {report['duration_s']:.0f} s",
        title_justify="left",
        header_style="bold",
    )
    for column in ("step", "requests", "errors", "p50 ms", "p95 ms", "rate per VU (1000 / p50)"):
        table.add_column(column, justify="left" if column == "step" else "right")
    for name, step in report["steps"].items():
        rate = "" if step["rate_per_vu"] is None else f"{step['rate_per_vu']:,.2f}/s"
        table.add_row(
            Text(name + (" (group)" if step["kind"] == "group" else "")),
            f"{step['requests']:,}",
            f"{step['errors']:,}",
            f"{step['p50_ms']:.2f}",
            f"{step['p95_ms']:.2f}",
            rate,
        )
    console.print(table)
    iteration = f", one iteration every {report['iteration_s']:.3f} s" if report.get("iteration_s") else ""
    console.print(
        f"one VU made {report['vu_rps']:,.2f} req/s{iteration}; VUs needed for R req/s ≈ R / {report['vu_rps']:,.2f}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    suggestion = report["suggestion"]
    console.print(
        "find the maximum (a search from one VU's worth; its steps grow with the logarithm of the answer):",
        markup=False,
        highlight=False,
    )
    console.print("  " + suggestion["command"], markup=False, highlight=False, soft_wrap=True)
    reach = (
        f"reaching the plan's peak of {suggestion['up_to']:,.0f} req/s in 20 steps"
        if suggestion.get("up_to")
        else "one VU's worth a step: how many steps depends on how many requests the target serves at once"
    )
    console.print(
        f"or the stepped ramp: steps of {suggestion['step']:g} {suggestion['unit']} every "
        f"{suggestion['step_duration_s']} s, {reach}:",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print("  " + suggestion["stepped_command"], markup=False, highlight=False, soft_wrap=True)


def render_scale(console: Console, report: dict[str, Any]) -> None:
    """The scalability study: throughput per instance (or user) count and how linear it was."""
    from horde.control.scale import per_one

    unit = report.get("unit", "instances")
    table = Table(title=f"scalability study {report['study_id']}", title_justify="left", header_style="bold")
    for column in (unit, "req/s", f"per {unit[:-1]}", "latency ms", "efficiency", "stopped by", "run"):
        table.add_column(column, justify="left" if column in ("stopped by", "run") else "right")
    for row in report["rows"]:
        table.add_row(
            str(row[unit]),
            f"{row['throughput_rps']:,.1f}",
            f"{row[per_one(unit)]:,.1f}",
            "" if row["latency_ms"] is None else f"{row['latency_ms']:.2f}",
            "" if row["efficiency"] is None else f"{row['efficiency'] * 100:.0f} %",
            row["saturation_reason"] or row["status"],
            row["run_id"],
        )
    console.print(table)
    forecast = report.get("forecast")
    if forecast is not None:
        for line in _forecast_lines(forecast):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _forecast_lines(forecast: dict[str, Any]) -> list[str]:
    """The scalability model fitted to a study, in a few lines: its parameters with their
    intervals, where throughput peaks, forecasts past the measured range, and the instances for
    the asked peak or the users supported at the asked rate (or why there is no forecast)."""
    unit = forecast.get("unit", "instances")
    lines = [
        f"left out of the fit: {row[unit]} {unit[:-1]}(s), run {row['run_id']}: {row['why']}"
        for row in forecast.get("left_out", [])
    ]
    if forecast["refusal"]:
        return [*lines, f"no forecast: {forecast['refusal']}"]
    level = f"{forecast['confidence'] * 100:.0f} %"

    def spread(pair: list[float] | None, form: str) -> str:
        return "" if pair is None else f" ({format(pair[0], form)}–{format(pair[1], form)})"

    peak = forecast["peak_n"]
    where = "the fitted curve has no peak (κ = 0)" if peak is None else f"throughput peaks at {peak:.1f} {unit}"
    if peak is not None and forecast["peak_n_interval"]:
        low, high = forecast["peak_n_interval"]
        where += f" ({low:.1f}–{'beyond' if high is None else f'{high:.1f}'})"
    lines.append(
        f"scalability model (intervals at {level}): λ {forecast['lambda']:,.1f}/s per {unit[:-1]}{spread(forecast['lambda_interval'], ',.1f')}, "
        f"σ {forecast['sigma']:.4f}{spread(forecast['sigma_interval'], '.4f')}, "
        f"κ {forecast['kappa']:.6f}{spread(forecast['kappa_interval'], '.6f')}; {where}"
    )
    shown = forecast.get("beyond") or []
    if shown:
        lines.append(
            "forecast: "
            + " · ".join(
                f"{point['n']:g} {unit} not known"
                if point["throughput"] is None
                else f"{point['n']:g} {unit} {point['throughput']:,.0f}/s"
                + ("" if point["low"] is None else f" ({point['low']:,.0f}–{point['high']:,.0f})")
                for point in shown
            )
        )
        refused = next((point["refusal"] for point in shown if point["throughput"] is None), None)
        if refused:
            lines.append(f"not known: {refused}")
    if forecast.get("note"):
        lines.append(forecast["note"])
    for answer in ("peak", "users"):
        if forecast.get(answer):
            lines.append(forecast[answer]["answer"])
    return lines


def render_verdicts(console: Console, verdicts: Sequence[Mapping[str, Any]]) -> None:
    """A table of the verdicts in their summary JSON form (:func:`verdicts_to_json`, what the
    store keeps, so `horde run` and `horde show` print the same), failures in red; prints
    nothing when there are none."""
    if not verdicts:
        return
    passed = sum(bool(verdict["passed"]) for verdict in verdicts)
    table = Table(
        title=f"thresholds — {passed} of {len(verdicts)} passed",
        title_justify="left",
        header_style="bold",
    )
    for column in ("threshold", "scope", "measured", "result"):
        table.add_column(column, justify="right" if column == "measured" else "left")
    for verdict in verdicts:
        if is_monitor_condition(verdict["condition"]):
            # A monitor's figure has its own unit in its name (cpu.busy_percent, tcp.time_wait).
            scope = f"monitor {parse_monitor_condition(verdict['condition']).monitor}"
            measured = "no data" if verdict["measured"] is None else f"{verdict['measured']:,.6g}"
        else:
            unit = unit_of(parse_condition(verdict["condition"]))
            scope = Scope.of(scenario=verdict.get("scenario"), step=verdict.get("step")).describe()
            measured = "no data" if verdict["measured"] is None else format_value(verdict["measured"], unit)
        table.add_row(
            # Conditions and step names are the user's text, never markup.
            Text(verdict["condition"]),
            Text(scope),
            measured,
            Text("pass", style="green") if verdict["passed"] else Text("FAIL", style="bold red"),
        )
    console.print(table)


_VERDICT_STYLES = {"slower": "bold red", "faster": "bold green", "not enough data": "yellow"}


@dataclass(frozen=True)
class Column:
    """A column of a table fitted to the terminal: ``keep`` columns (a run id, a verdict) are
    never cut or dropped; the others go, lowest ``priority`` first, when the table is wider than
    the terminal; a value is never cut in the middle. A ``wrap`` column's values (step names)
    may break between words, never inside one, once only the essential columns are left."""

    name: str
    priority: int
    justify: Literal["left", "right"] = "right"
    keep: bool = False
    wrap: bool = False


def fitted_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    styles: Sequence[str | None] | None = None,
    *,
    essential_priority: int | None = None,
    **options: Any,
) -> Table:
    """A rich Table of ``rows`` with as many of ``columns`` as fit ``console``'s width whole.

    Columns of ``essential_priority`` or above go only after the ``wrap`` columns have been
    narrowed to their longest word: a narrow terminal shows a step's name on two lines beside
    its p95 rather than the name alone.
    """

    def width(cell: Any) -> int:
        text = cell.plain if isinstance(cell, Text) else str(cell)
        return max((len(line) for line in text.splitlines()), default=0)

    def longest_word(cell: Any) -> int:
        text = cell.plain if isinstance(cell, Text) else str(cell)
        return max((len(word) for word in text.split()), default=0)

    natural = [max([len(column.name), *(width(row[index]) for row in rows)]) for index, column in enumerate(columns)]
    narrowest = [
        max(
            [
                len(column.name) if not column.wrap else longest_word(column.name),
                *((longest_word if column.wrap else width)(row[index]) for row in rows),
            ]
        )
        for index, column in enumerate(columns)
    ]
    kept = list(range(len(columns)))

    def too_wide(widths: Sequence[int]) -> bool:
        # Each column costs its text, a space either side and a border.
        return sum(widths[i] + 3 for i in kept) + 1 > console.width

    def drop_while_too_wide(widths: Sequence[int], below: int | None) -> None:
        while too_wide(widths):
            droppable = [i for i in kept if not columns[i].keep and (below is None or columns[i].priority < below)]
            if not droppable:
                return
            kept.remove(min(droppable, key=lambda i: columns[i].priority))

    drop_while_too_wide(natural, essential_priority)
    wrapped = too_wide(natural)
    if wrapped:
        drop_while_too_wide(narrowest, None)
    table = Table(header_style="bold", **options)
    for index in kept:
        column = columns[index]
        if column.wrap and wrapped:
            # Broken between words by rich; as wide as its longest word, so never inside one.
            table.add_column(column.name, justify=column.justify, min_width=narrowest[index], overflow="fold")
            continue
        table.add_column(column.name, justify=column.justify, no_wrap=True, min_width=natural[index], overflow="fold")
    for number, row in enumerate(rows):
        table.add_row(*(row[i] for i in kept), style=styles[number] if styles else None)
    return table


#: The summary's table, by what a reader of a narrow terminal misses least: the step's name
#: stays whole (or, where even the essential columns leave too little room, breaks between
#: words), then p95, errors, throughput and the request count; then p99, p50, p90, max.
SUMMARY_COLUMNS = (
    Column("step", 200, "left", keep=True, wrap=True),
    Column("requests", 80),
    Column("errors", 95),
    Column("req/s", 90),
    Column("p50 ms", 60),
    Column("p90 ms", 50),
    Column("p95 ms", 100),
    Column("p99 ms", 70),
    Column("max ms", 40),
)
ESSENTIAL_SUMMARY_PRIORITY = 80


def render_comparison(console: Console, comparison: RunComparison) -> None:
    """The comparison as a table a person reads, with the rule under it."""
    columns = [
        Column("step", 100, "left", keep=True),
        Column("requests", 60),
        Column("p50 ms", 70),
        Column("p90 ms", 40),
        Column("p95 ms", 80),
        Column("p99 ms", 50),
        Column("errors %", 65),
        Column("p-value", 45),
        Column("P(slower)", 30),
        Column("verdict", 100, "left", keep=True),
    ]
    console.print(
        fitted_table(
            console,
            columns,
            [_comparison_cells(step) for step in comparison.steps],
            styles=["bold" if step.name == ALL_REQUESTS else None for step in comparison.steps],
            title=f"{comparison.candidate_id} against {comparison.baseline_id}",
            title_justify="left",
        )
    )
    for note in comparison.notes:
        console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    rule = comparison.rule
    console.print(
        f"test: Mann-Whitney U over the merged histograms; a step differs only if p < {rule.alpha:g} and its p50 or p90 "
        f"moved that way by more than {rule.min_relative_change:.0%} and {rule.min_absolute_change_ms:g} ms; "
        f"fewer than {rule.min_requests} requests: not enough data",
        markup=False,
        highlight=False,
        soft_wrap=True,
        style="dim",
    )


def _comparison_cells(step: StepComparison) -> list[Any]:
    def pair(before: float | None, after: float | None, change: float | None) -> str:
        left = "—" if before is None else f"{before:,.2f}"
        right = "—" if after is None else f"{after:,.2f}"
        return f"{left} → {right}" + ("" if change is None else f" ({change:+.1%})")

    a, b = step.baseline, step.candidate
    cells: list[Any] = [Text(step.name), f"{a.requests if a else '—'} → {b.requests if b else '—'}"]
    for key in ("p50", "p90", "p95", "p99"):
        cells.append(
            pair(a.latency_ms[key] if a else None, b.latency_ms[key] if b else None, step.relative_change[key])
        )
    errors = pair(a.error_percent if a else None, b.error_percent if b else None, None)
    if step.error_percent_change:
        errors += f" ({step.error_percent_change:+.2f} pt)"
    cells.append(errors)
    cells.append(step.test.p_text if step.test else "—")
    cells.append(f"{step.test.probability_of_superiority:.3f}" if step.test else "—")
    cells.append(Text(step.verdict, style=_VERDICT_STYLES.get(step.verdict, "")))
    return cells
