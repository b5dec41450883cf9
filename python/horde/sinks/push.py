"""A run's figures pushed, each second as it ends, to where a team already looks (a sink).

``--out prometheus-rw=URL`` sends them by Prometheus remote write 1.0 (a protobuf
``WriteRequest``, snappy block-compressed, ``POST`` with ``Content-Encoding: snappy`` and
``X-Prometheus-Remote-Write-Version: 0.1.0``) to Prometheus' receiver, Mimir, Thanos, VictoriaMetrics
or Grafana Cloud; ``--out otlp=URL`` sends them as OpenTelemetry metrics over OTLP/HTTP in its JSON
encoding (``Content-Type: application/json``) to a collector's ``/v1/metrics``.

Both carry what the scrape endpoint serves (:mod:`horde.sinks.prometheus`): the same families,
names, labels and HELP, with ``run``, ``plan`` and the run's tags on every series, cumulative since
the run started. Counters are OTLP cumulative monotonic sums, gauges gauges, and the latency
histogram an OTLP histogram with the same bounds. On a cluster the conductor's sink sees the
coordinator's merged seconds (:mod:`horde.cluster.merge`), so the run is pushed once, with
percentiles of the exact histogram merge; generators push nothing.

The protobuf of remote write is written here (:class:`_Protobuf`, four message types of two to
three fields each) rather than through ``protobuf`` and generated code: that is a large native
dependency for some fifty lines of wire format. JSON for OTLP needs no protobuf at all, and every
OTLP/HTTP receiver accepts it.

A push never blocks the run: :meth:`PushSink.update` only queues the snapshot; a thread of the
sink's own folds it (decoding its histograms into the fixed buckets costs milliseconds a step) and
sends each second in order, with :data:`ATTEMPTS` tries and a doubling pause between them. Seconds
that arrive while a push is under way (a slow target) are folded into the next push, whose
counters hold them; their own gauges are not sent. A second that cannot be sent (the target is
down, refuses, is slower than a push a second, or the run ends before it goes) is counted as not
sent, with its series; the first failure is a warning on the console and the last one is in
:meth:`PushSink.report`. The run goes on, and its exit code does not change.
"""

from __future__ import annotations

import base64
import json
import queue
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import cramjam

from horde import __version__
from horde.engine.snapshot import Snapshot
from horde.errors import InvalidInput
from horde.sinks.prometheus import Family, Labels, RunFigures, run_labels
from horde.results.summary_blocks import OutputBlock

#: The kinds of ``--out KIND=URL`` that push.
PROMETHEUS_RW: Final = "prometheus-rw"
OTLP: Final = "otlp"
KINDS: Final = (PROMETHEUS_RW, OTLP)

#: Tries per second's push, and the pause before the second try (doubled before each next one).
ATTEMPTS: Final = 3
FIRST_PAUSE_S: Final = 0.2
#: One try's time limit: a push slower than this is a failed try.
REQUEST_TIMEOUT_S: Final = 2.0
#: How long the end of the run waits for the last seconds to go out.
CLOSE_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class PushTarget:
    """One ``--out KIND=URL``: where to push and how. ``url`` is the address posted to;
    ``shown`` is the same without any user or password (for the console and the summary)."""

    kind: str
    url: str
    shown: str
    authorization: str | None = None


def parse_out(text: str) -> PushTarget:
    """``prometheus-rw=URL`` or ``otlp=URL`` as given to ``--out``. A URL's ``user:password@``
    becomes basic authentication and is never shown; an OTLP URL without a path gets
    ``/v1/metrics`` (OTLP/HTTP's path for metrics).

    >>> parse_out("prometheus-rw=http://127.0.0.1:9090/api/v1/write").url
    'http://127.0.0.1:9090/api/v1/write'
    >>> target = parse_out("otlp=https://me:secret@collector:4318")
    >>> target.url, target.shown
    ('https://collector:4318/v1/metrics', 'https://collector:4318/v1/metrics')
    """
    kind, separator, url = text.partition("=")
    kind = kind.strip()
    example = "--out prometheus-rw=http://127.0.0.1:9090/api/v1/write or --out otlp=http://127.0.0.1:4318"
    if not separator or kind not in KINDS:
        raise InvalidInput(
            f"--out: '{_without_password(text)}' is not KIND=URL with KIND one of {', '.join(KINDS)}",
            hint=f"for example {example}",
        )
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(
            f"--out {kind}: '{_without_password(url)}' is not an http:// or https:// URL", hint=f"for example {example}"
        )
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        raise InvalidInput(
            f"--out {kind}: '{_without_password(url)}' has no valid port", hint=f"for example {example}"
        ) from None
    path = parts.path
    if kind == OTLP and path in ("", "/"):
        path = "/v1/metrics"
    netloc = parts.netloc.rpartition("@")[2]
    authorization = None
    if parts.username is not None:
        credentials = f"{parts.username}:{parts.password or ''}".encode()
        authorization = "Basic " + base64.b64encode(credentials).decode("ascii")
    address = urlunsplit((parts.scheme, netloc, path, parts.query, ""))
    return PushTarget(kind, address, address, authorization)


def _without_password(text: str) -> str:
    # What a refusal may repeat of the user's text: nothing between :// and @.
    scheme, separator, rest = text.partition("://")
    if separator and "@" in rest.split("/", 1)[0]:
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return text


#: One second as queued: when it came, and its snapshot (None: the run has ended).
_Queued = tuple[int, Snapshot | None]


class PushSink:
    """Pushes each second's figures to one target; a sink of the conductor.

    ``on_warning`` is told, from the run loop's thread, of the first push that failed every try
    (then of none until one succeeds again). Call :meth:`set_run_id` once the run is recorded and
    :meth:`close` when it ends; :meth:`report` says what was not sent.
    """

    def __init__(
        self,
        target: PushTarget,
        plan_name: str,
        *,
        cpu_limit_percent: float,
        tags: Mapping[str, str] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.plan_name = plan_name
        self.tags = dict(tags or {})
        self.on_warning = on_warning
        self._run_id = ""
        self._figures = RunFigures(cpu_limit_percent)
        self._started_ns = time.time_ns()
        self._queue: queue.Queue[_Queued] = queue.Queue()
        self._lock = threading.Lock()  # guards the counts below
        self._pushed = 0
        self._failed = 0
        self._series_not_sent = 0
        self._last_error: str | None = None
        self._warnings: list[str] = []
        self._warned = False
        self._closed = False
        #: Series in the last push (what each second not sent is counted as).
        self._series = 0
        self._thread = threading.Thread(target=self._send_all, name=f"horde-push-{target.kind}", daemon=True)
        self._thread.start()

    def set_run_id(self, run_id: str) -> None:
        """Labels every series with ``run_id`` from now on (best before the first update)."""
        self._run_id = run_id

    # -- the Sink protocol -------------------------------------------------------------------

    def update(self, snapshot: Snapshot) -> None:
        self._queue.put((time.time_ns(), snapshot))
        self._tell_warnings()

    def note_stopping(self) -> None:
        """Nothing to push: the figures say what the run does."""

    def note(self, message: str) -> None:
        """Nothing to push: the targets take numbers, not messages."""

    # -- the end ------------------------------------------------------------------------------

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> OutputBlock:
        """Waits (up to ``timeout_s``) for the queued seconds to go out, then stops; a second
        still queued then counts as not sent. Idempotent."""
        self._queue.put((time.time_ns(), None))
        self._thread.join(timeout_s)
        with self._lock:
            self._closed = True
        left = 0
        while True:
            try:
                left += self._queue.get_nowait()[1] is not None
            except queue.Empty:
                break
        if left:
            self._count_failure(left, self._series, "the run ended before it could be sent", at_close=True)
        self._tell_warnings()
        return self.report()

    def report(self) -> OutputBlock:
        """What this output sent: seconds pushed and not, series not sent, the last error (the
        summary's ``outputs`` entry)."""
        with self._lock:
            return {
                "kind": self.target.kind,
                "url": self.target.shown,
                "pushed": self._pushed,
                "failed": self._failed,
                "series_not_sent": self._series_not_sent,
                "last_error": self._last_error,
            }

    # -- sending ------------------------------------------------------------------------------

    def _send_all(self) -> None:
        ended = False
        while not ended:
            # Every second queued since the last push: all folded in, the newest pushed.
            taken = [self._queue.get()]
            while True:
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            snapshots = [snapshot for _, snapshot in taken if snapshot is not None]
            ended = len(snapshots) < len(taken)
            if not snapshots:
                continue
            for snapshot in snapshots:
                self._figures.update(snapshot)
            found = self._figures.families(run_labels(self._run_id, self.plan_name, self.tags))
            series = sum(len(family.samples) for family in found)
            if len(snapshots) > 1:
                self._count_failure(
                    len(snapshots) - 1,
                    series,
                    "the target is slower than a push a second (their counters went with the next second's push)",
                )
            try:
                body, headers = self._encoded(found, taken[len(snapshots) - 1][0])
                error = self._send(body, headers)
            except Exception as unexpected:  # noqa: BLE001 - a push never ends the run, whatever fails
                error = f"{type(unexpected).__name__}: {unexpected}"
            with self._lock:
                self._series = series
                if error is None:
                    self._pushed += 1
                    self._warned = False
            if error is not None:
                self._count_failure(1, series, error)

    def _encoded(self, found: list[Family], at_ns: int) -> tuple[bytes, dict[str, str]]:
        if self.target.kind == PROMETHEUS_RW:
            body = bytes(cramjam.snappy.compress_raw(write_request(found, at_ns // 1_000_000)))
            headers = {
                "Content-Type": "application/x-protobuf",
                "Content-Encoding": "snappy",
                "X-Prometheus-Remote-Write-Version": "0.1.0",
            }
        else:
            payload = otlp_metrics(found, start_ns=self._started_ns, at_ns=at_ns)
            body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
            headers = {"Content-Type": "application/json"}
        headers["User-Agent"] = f"horde/{__version__}"
        if self.target.authorization is not None:
            headers["Authorization"] = self.target.authorization
        return body, headers

    def _send(self, body: bytes, headers: Mapping[str, str]) -> str | None:
        """None once sent; else why the last try failed."""
        pause_s = FIRST_PAUSE_S
        error = "not tried"
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(pause_s)
                pause_s *= 2
            request = urllib.request.Request(self.target.url, data=body, headers=dict(headers), method="POST")
            try:
                with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                    response.read()
                return None
            except urllib.error.HTTPError as refused:
                detail = refused.read(300).decode("utf-8", "replace").strip()
                error = f"HTTP {refused.code}" + (f": {detail}" if detail else "")
                # A 4xx other than 429 says the data is refused: trying it again changes nothing.
                if 400 <= refused.code < 500 and refused.code != 429:
                    return error
            except (urllib.error.URLError, OSError) as failed:
                reason = failed.reason if isinstance(failed, urllib.error.URLError) else failed
                error = str(getattr(reason, "strerror", None) or reason)
        return error

    def _count_failure(self, seconds: int, series: int, error: str, *, at_close: bool = False) -> None:
        """``seconds`` not sent, of ``series`` each."""
        with self._lock:
            if self._closed and not at_close:
                return  # the report is given: a push that outlived close() changes nothing
            self._failed += seconds
            self._series_not_sent += seconds * series
            self._last_error = error
            if not self._warned:
                self._warned = True
                self._warnings.append(
                    f"warning: --out {self.target.kind} {self.target.shown}: a second's figures were not "
                    f"sent after {ATTEMPTS} tries ({error}); the run goes on and keeps trying"
                )

    def _tell_warnings(self) -> None:
        with self._lock:
            warnings, self._warnings = self._warnings, []
        if self.on_warning is not None:
            for warning in warnings:
                self.on_warning(warning)


# -- Prometheus remote write 1.0 ------------------------------------------------------------------


class _Protobuf:
    """The protobuf wire format, as much of it as remote write's messages use: varint, 64-bit and
    length-delimited fields."""

    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, value: int) -> None:
        value &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
        while value > 0x7F:
            self.out.append(value & 0x7F | 0x80)
            value >>= 7
        self.out.append(value)

    def key(self, field: int, wire_type: int) -> None:
        self.varint(field << 3 | wire_type)

    def int64(self, field: int, value: int) -> None:
        self.key(field, 0)
        self.varint(value)

    def double(self, field: int, value: float) -> None:
        self.key(field, 1)
        self.out += struct.pack("<d", value)

    def bytes_(self, field: int, value: bytes) -> None:
        self.key(field, 2)
        self.varint(len(value))
        self.out += value

    def string(self, field: int, value: str) -> None:
        self.bytes_(field, value.encode("utf-8"))


def write_request(found: Iterable[Family], timestamp_ms: int) -> bytes:
    """A remote write 1.0 ``WriteRequest`` (uncompressed) of every sample of ``found`` at
    ``timestamp_ms``: ``TimeSeries`` (field 1) of ``Label`` (1: name, 2: value; ``__name__``
    first, then by name, as the receiver requires) and one ``Sample`` (1: double value, 2: int64
    milliseconds)."""
    request = _Protobuf()
    for family in found:
        for name, labels, value in family.samples:
            series = _Protobuf()
            for label_name, label_value in sorted([("__name__", name), *labels]):
                label = _Protobuf()
                label.string(1, label_name)
                label.string(2, label_value)
                series.bytes_(1, bytes(label.out))
            sample = _Protobuf()
            sample.double(1, float(value))
            sample.int64(2, timestamp_ms)
            series.bytes_(2, bytes(sample.out))
            request.bytes_(1, bytes(series.out))
    return bytes(request.out)


# -- OTLP/HTTP, JSON encoding -----------------------------------------------------------------------

#: OTLP's AGGREGATION_TEMPORALITY_CUMULATIVE: every value is since the run started.
_CUMULATIVE: Final = 2


def otlp_metrics(found: Iterable[Family], *, start_ns: int, at_ns: int) -> dict[str, object]:
    """An ``ExportMetricsServiceRequest`` in OTLP's JSON encoding (int64 fields as strings): one
    resource (``service.name`` horde), one scope, a metric per family; each sample's labels are its
    data point's attributes."""
    metrics: list[dict[str, object]] = []
    times = {"startTimeUnixNano": str(start_ns), "timeUnixNano": str(at_ns)}
    for family in found:
        if not family.samples:
            continue
        metric: dict[str, object] = {"name": family.name, "description": family.help}
        if family.kind == "histogram":
            metric["histogram"] = {
                "dataPoints": [
                    {**_attributes(labels), **times, **point} for labels, point in _histogram_points(family)
                ],
                "aggregationTemporality": _CUMULATIVE,
            }
        else:
            points = [{**_attributes(labels), **times, **_number(value)} for _, labels, value in family.samples]
            if family.kind == "counter":
                metric["sum"] = {"dataPoints": points, "aggregationTemporality": _CUMULATIVE, "isMonotonic": True}
            else:
                metric["gauge"] = {"dataPoints": points}
        metrics.append(metric)
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "horde"}}]},
                "scopeMetrics": [{"scope": {"name": "horde", "version": __version__}, "metrics": metrics}],
            }
        ]
    }


def _attributes(labels: Labels) -> dict[str, object]:
    return {"attributes": [{"key": name, "value": {"stringValue": value}} for name, value in labels]}


def _number(value: float | int) -> dict[str, object]:
    return {"asInt": str(value)} if isinstance(value, int) else {"asDouble": float(value)}


def _histogram_points(family: Family) -> list[tuple[Labels, dict[str, object]]]:
    """The exposition's cumulative ``_bucket`` series (by ``le``), ``_sum`` and ``_count`` of each
    series of a histogram family, as OTLP data points (a count per bucket, not cumulative)."""
    series: dict[tuple[tuple[str, str], ...], dict[str, object]] = {}
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, int]]] = {}
    for name, labels, value in family.samples:
        key = tuple((label, text) for label, text in labels if label != "le")
        point = series.setdefault(key, {})
        if name.endswith("_bucket"):
            bound = dict(labels)["le"]
            buckets.setdefault(key, []).append((float(bound), int(value)))
        elif name.endswith("_sum"):
            point["sum"] = float(value)
        elif name.endswith("_count"):
            point["count"] = str(int(value))
    points: list[tuple[Labels, dict[str, object]]] = []
    for key, point in series.items():
        cumulative = sorted(buckets.get(key, []))
        counts = [count - previous for (_, count), previous in zip(cumulative, [0, *(c for _, c in cumulative)])]
        point["bucketCounts"] = [str(count) for count in counts]
        point["explicitBounds"] = [bound for bound, _ in cumulative if bound != float("inf")]
        points.append((key, point))
    return points


def push_sinks(
    targets: Sequence[PushTarget],
    plan_name: str,
    *,
    cpu_limit_percent: float,
    tags: Mapping[str, str] | None,
    on_warning: Callable[[str], None] | None,
) -> list[PushSink]:
    """One sink per ``--out`` target, each sending from a thread of its own."""
    return [
        PushSink(target, plan_name, cpu_limit_percent=cpu_limit_percent, tags=tags, on_warning=on_warning)
        for target in targets
    ]
