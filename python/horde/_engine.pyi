"""Type stub of the native module ``horde._engine`` (built from ``crates/horde-py/src/lib.rs``).

Keep in step with that file and with ARCHITECTURE.md, "The native module".
"""

from collections.abc import Callable
from typing import Any, final

ENGINE_VERSION: str

def validate_plan(plan_json: str) -> list[tuple[str, str, str | None]]:
    """Every problem of a plan as ``(path, message, hint)`` triples (the hint None where the rule
    has none); empty when the engine can run it."""

def is_secret_name(name: str) -> bool:
    """Whether a header, query field, body field, variable or parameter so named carries a
    credential (split on ``-``, ``_``, ``.``, whitespace and camelCase, a segment is a credential
    word, or the name holds one): the rule the engine redacts recorded exchanges by."""

def is_secret_query_field(name: str) -> bool:
    """Whether a query field so named holds a secret: a credential's name, or a one-time
    credential's field (``code``, ``state``, ``nonce``, ``hash``)."""

def variable_name_problem(name: str, what: str) -> tuple[str, str] | None:
    """Why ``name`` cannot name a variable templates read (``what`` says which: "feeder name",
    "variable"): the problem and its hint, or None (horde-plan's rule)."""

def http_methods() -> list[str]:
    """The HTTP methods an http step sends, upper case (horde-plan's one list)."""

def method_problem(method: str) -> tuple[str, str] | None:
    """Why an http step cannot send ``method``: the problem and its hint, or None."""

def target_problems(target_json: str) -> list[tuple[str, str, str | None]]:
    """A target's own problems as ``(path, message, hint)``, located under ``target.``
    (horde-plan's rules); ValueError when the JSON is no target."""

def workload_problems(workload_json: str) -> list[tuple[str, str, str | None]]:
    """A workload's own problems as ``(path, message, hint)``, located under ``workload.``
    (horde-plan's rules); ValueError when the JSON is no workload."""

def scenario_structure_problems(scenario_json: str) -> list[tuple[str, str, str | None]]:
    """The problems that span a scenario's step lists (names unique at any depth, step depth,
    feeders and variables named like them, pacing against the workload) as ``(path, message,
    hint)``, located from the scenario; any JSON is read, what is not of the shape a rule reads
    is left to the types."""

def plan_bounds() -> dict[str, int | float]:
    """The engine's bounds on a plan's values by name (``MAX_VUS``, ...): counts as ints,
    amounts as floats; ``horde.plan.bounds`` reads them once."""

@final
class RunHandle:
    def poll(self, timeout_s: float) -> dict[str, Any] | None:
        """The next snapshot, or None if none came within ``timeout_s`` (or after the final one)."""
    def stop(self) -> None: ...
    def retarget(self, scenario: int, level: float, ramp_s: float = 0.0) -> None:
        """Raises ValueError when the scenario or level is out of range."""
    def repace(self, scenario: int, factor: float) -> None:
        """Each pause scenario number ``scenario``'s VUs start from now on (think times, pacing)
        is the plan's divided by ``factor``; raises ValueError unless 0.001 <= factor <= 1000."""
    @property
    def finished(self) -> bool: ...
    @property
    def planned_duration_s(self) -> float: ...

def start_run(
    plan_json: str,
    workers: int | None = None,
    first_slot: int | None = None,
    slots: int | None = None,
    start_at: float | None = None,
    record_exchanges: int = 0,
    single_iteration: bool = False,
) -> RunHandle:
    """Raises ValueError on a bad plan, RuntimeError on a setup fault. A generator of a run
    spread over several gives its workers' slots (``first_slot`` of ``slots``) and the agreed
    start (seconds since the Unix epoch). ``record_exchanges``: keep the first N exchanges of
    each step in full (a snapshot's ``exchanges``); ``single_iteration``: each VU runs one
    iteration with its setup and teardown, then the run stops (``horde try``)."""

def histogram_merge(parts: list[bytes]) -> bytes: ...
def merge_seconds(parts: list[Any], is_final: bool) -> dict[str, Any]: ...
def merge_steps(parts: list[Any]) -> dict[str, Any]: ...
def histogram_buckets(blob: bytes) -> list[tuple[int, int, int]]:
    """Non-empty buckets ``(lowest_us, highest_us, count)``, lowest first; ValueError on bad bytes."""

def histogram_stats(blob: bytes, percentiles: list[float]) -> dict[str, Any]:
    """``{"count", "min_us", "max_us", "mean_us", "percentiles_us": [...]}``"""

def histogram_from_values(values_us: list[int]) -> bytes:
    """An HDR V2 histogram of exactly these microsecond values (for known-answer tests)."""

@final
class TargetHandle:
    @property
    def port(self) -> int: ...
    @property
    def tcp_port(self) -> int | None: ...
    @property
    def udp_port(self) -> int | None: ...
    @property
    def kcp_port(self) -> int | None: ...
    def stop(self) -> None: ...

@final
class LinkHandle:
    @property
    def namespace(self) -> str: ...
    @property
    def outside_device(self) -> str: ...
    @property
    def inside_device(self) -> str: ...
    @property
    def outside_address(self) -> str: ...
    @property
    def inside_address(self) -> str: ...
    @property
    def running(self) -> bool: ...
    def stats(self) -> dict[str, float]: ...
    def stop(self) -> None: ...

def start_link(
    delay_ms: float = 0.0,
    jitter_ms: float = 0.0,
    loss_percent: float = 0.0,
    duplicate_percent: float = 0.0,
    reorder_percent: float = 0.0,
    seed: int = 1,
    rate_mbit: float | None = None,
    queue_ms: float = 100.0,
) -> LinkHandle:
    """Raises PermissionError when not root, FileNotFoundError without /dev/net/tun or `ip`,
    OSError otherwise."""

def start_target(
    host: str = "127.0.0.1",
    port: int = 0,
    workers: int | None = None,
    service_ms: float | None = None,
    threads: int = 1,
    service_times: str = "fixed",
    tcp_port: int | None = None,
    udp_port: int | None = None,
    tcp_framing: str = "newline",
    kcp_port: int | None = None,
    tls: tuple[str, str] | None = None,
    shared: tuple[float, float] | None = None,
) -> TargetHandle:
    """Raises ValueError on a bad capacity model, shared costs or TLS certificate, OSError when
    it cannot listen. ``tls``: (certificate PEM, key PEM): HTTPS, ALPN offering h2 and
    http/1.1. ``shared``: (serial ms, crosstalk ms): join the resource every target of this
    process shares (horde-target's ``SharedCosts``)."""

def self_signed_certificate(names: list[str]) -> tuple[str, str]:
    """A self-signed certificate for host names and IP addresses: (certificate PEM, key PEM)."""

def profile_logs(
    paths: list[str],
    *,
    nginx: bool,
    time_unit_ms: float | None,
    session_name: str | None,
    json_fields: dict[str, tuple[str, bool]] | None,
    json_duration_ms: float,
    json_session: tuple[str, str, bool] | None,
    templates: list[tuple[str | None, list[str | int], list[str], list[bool]]],
    session_gap_s: float,
    max_endpoints: int,
    is_secret_parameter: Callable[[str], bool],
    names_a_secret: Callable[[str], bool],
    has_email: Callable[[str], bool],
    on_progress: Callable[[int, int, int, int, int], None] | None = None,
) -> dict[str, Any]:
    """Combined (``nginx=False``: a whole bare number after the agent is µs), nginx or (with
    ``json_fields``: role -> (name, nested), a bare duration's ms per unit, the session as None,
    ("cookie", name, False) or ("header", field, nested)) JSON logs, merged in time order and
    added up (crate ``horde-logs``). ``time_unit_ms``: ms per unit of that
    number when given; ``session_name``: the cookie or header keying sessions (None: client
    address and agent). ``on_progress(lines, requests, bad, bytes_read, bytes_total)`` every
    65,536 lines and at each file's end (it may raise to stop; Ctrl-C is checked there).

    Returns ``{"error": {"file": index, "kind": "io", "line", "message"}}`` or
    ``{"error": {"file", "kind": "not_text", "zeros": bool}}`` for a file that cannot be read,
    else ``{"endpoints": [endpoint, ...] (by first appearance), "other": endpoint | None (past
    max_endpoints), "per_minute": [(minute, requests)], "sessions": {"think_ms": histogram,
    "lengths": [(requests, sessions)], "transitions": [((from, to), count)] (first seen first),
    "transitions_pruned", "unkeyed", "closed_early"}, "counts": {"lines", "records", "bad",
    "bad_samples": [(file, line, reason, text unredacted)], "bytes_read", "bytes_total"},
    "refused": (bad, lines, file | None) | None}``; an endpoint is ``{"shapes": [(method,
    pieces (str | slot index), query names, slots [(label, kind, "path" | "query")])],
    "count", "timing": histogram, "statuses": [(status, n)], "samples": [tuple of str | None],
    "per_minute": [(minute, requests)] (only the minutes it had requests in)}``
    and a histogram ``(buckets [(index, n)], count, total, maximum, zeros)`` in the 1 %
    buckets of ``horde.profile.histogram``. Raises what a rule or on_progress raised."""

@final
class CombinedParser:
    """Combined (``nginx=False``) or nginx lines one at a time (crate ``horde-logs``)."""
    def __new__(cls, *, nginx: bool, time_unit_ms: float | None, session_name: str | None) -> CombinedParser: ...
    def parse(self, line: str) -> tuple[float, str, str, int, float | None, str, str, str | None] | str:
        """``(time_s, method, target, status, duration_ms, client, agent, session)``, or why the
        line is no request."""

@final
class Templater:
    """Requests templated one at a time (crate ``horde-logs``), the rules' answers remembered."""
    def __new__(
        cls,
        is_secret_parameter: Callable[[str], bool],
        names_a_secret: Callable[[str], bool],
        has_email: Callable[[str], bool],
        templates: list[tuple[str | None, list[str | int], list[str], list[bool]]],
    ) -> Templater:
        """``templates``: given templates, (method or None, pieces: text or placeholder index,
        labels, secret flags), the first a path matches whole taking its shape."""
    def template(
        self, method: str, target: str
    ) -> tuple[list[str | int], list[str], list[tuple[str, str, str]], list[str | None]]:
        """``(pieces (text | slot index), query names, slots [(label, kind, "path" | "query")],
        values (None: not to be kept))``; raises what a rule raised."""

def classify(segment: str, has_email: Callable[[str], bool]) -> str | None: ...

@final
class JsonLineParser:
    """JSON lines one at a time (crate ``horde-logs``)."""
    def __new__(
        cls, fields: dict[str, tuple[str, bool]], duration_ms: float, session: tuple[str, str, bool] | None
    ) -> JsonLineParser: ...
    def parse(self, line: str) -> tuple[float, str, str, int, float | None, str, str, str | None] | str: ...

def first_lines(path: str, count: int) -> tuple[str, Any]:
    """``("lines", [up to count non-blank lines])``, ``("not_text", zeros)`` or ``("io", message)``."""
