"""The plan's ``monitors``: what the control plane watches on the target's side while a run goes.

Each monitor names a source and how often it is read (every second by default), on the run's
own time axis: a ``host`` (this machine, from /proc), a ``prometheus`` endpoint (any exporter's
``/metrics``; with ``node_exporter: true`` a remote machine's host figures), or a ``postgres``
database (its DSN; the password comes from an environment variable and is never stored). Each
type carries the thresholds of its diagnosis rules, with defaults.

>>> monitor = PostgresMonitor(name="db", type="postgres", dsn="postgresql://app@127.0.0.1:5432/game")
>>> monitor.interval_s, monitor.diagnosis.dead_tuples_growth_per_s
(1, 50.0)
>>> parse_monitor_condition("monitor.db.replication_lag_s > 5 for 10s")
MonitorCondition(monitor='db', metric='replication_lag_s', op='>', value=5.0, for_s=10, text='monitor.db.replication_lag_s > 5 for 10s')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator

from horde.plan.common import TAGGED, custom, validate_unique_names

_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

#: The longest a monitor may wait between two readings of its source.
MAX_INTERVAL_S = 300


class HostDiagnosis(BaseModel):
    """The thresholds of the host rules (a host monitor's, or a node_exporter scrape's)."""

    model_config = _STRICT

    cpu_percent: float = Field(default=90.0, gt=0, le=100, description="CPU busy above this share ...")
    cpu_for_s: int = Field(
        default=10, ge=1, le=3600, description="... for this many seconds in a row: 'CPU above 90 % for 10 s'"
    )
    nic_percent: float = Field(
        default=90.0,
        gt=0,
        le=100,
        description="an interface sending or receiving above this share of its link speed ...",
    )
    nic_for_s: int = Field(
        default=5, ge=1, le=3600, description="... for this many seconds in a row: a saturated interface"
    )
    link_speed_mbps: float | None = Field(
        default=None,
        gt=0,
        description="the link speed to judge interfaces by, Mbit/s; default: each interface's own "
        "(/sys/class/net/IF/speed, node_network_speed_bytes); interfaces without one are not judged",
    )
    time_wait_growth_per_s: float = Field(
        default=100.0, gt=0, description="time-wait sockets piling up: growing faster than this per second ..."
    )
    time_wait_min: int = Field(default=1000, ge=0, description="... while there are more than this many ...")
    time_wait_window_s: int = Field(default=30, ge=2, le=3600, description="... over this many seconds")


class PostgresDiagnosis(BaseModel):
    """The thresholds of the PostgreSQL rules."""

    model_config = _STRICT

    dead_tuples_growth_per_s: float = Field(
        default=50.0,
        gt=0,
        description="a table's dead tuples growing faster than this per second, autovacuum's work included, ...",
    )
    dead_tuples_min: int = Field(default=10_000, ge=0, description="... once it holds more than this many ...")
    dead_tuples_window_s: int = Field(default=30, ge=2, le=3600, description="... over this many seconds")
    lag_window_s: int = Field(
        default=30, ge=2, le=3600, description="replication lag rising without bound: rising over this many seconds ..."
    )
    lag_min_bytes: int = Field(default=1_000_000, ge=0, description="... to more than this many bytes of WAL behind")
    xmin_age_limit: int = Field(
        default=10_000,
        ge=1,
        description="a standby holds back vacuum when the xmin it reports (hot_standby_feedback) is "
        "older than this many transactions ...",
    )
    xmin_for_s: int = Field(
        default=10, ge=1, le=3600, description="... for this many seconds in a row, while dead tuples grow"
    )
    connections_percent: float = Field(
        default=95.0, gt=0, le=100, description="connections at this share of max_connections"
    )


class _Monitor(BaseModel):
    model_config = TAGGED

    name: str = Field(description="the monitor's name, unique in the plan: 'db' in monitor.db.cpu.busy_percent")
    interval_s: int = Field(
        default=1, ge=1, le=MAX_INTERVAL_S, description="read the source every this many seconds; default 1"
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise custom(
                "monitor_name",
                f"'{name}' is not a valid monitor name",
                "use letters, digits, '_' and '-', starting with a letter, e.g. 'db' or 'db_host'",
            )
        return name


class HostMonitor(_Monitor):
    """This machine, from /proc: CPU, load, memory, network per interface, TCP sockets by state,
    disks, open files. A remote machine is watched through its node_exporter (``prometheus``
    with ``node_exporter: true``)."""

    type: Literal["host"] = Field(default="host", description="'host': the machine Horde runs on")
    interfaces: list[str] = Field(default_factory=list, description="network interfaces to keep; default: all")
    disks: list[str] = Field(
        default_factory=list, description="block devices to keep (sda, nvme0n1); default: whole disks"
    )
    diagnosis: HostDiagnosis = Field(default_factory=HostDiagnosis, description="the host rules' thresholds")


class Series(BaseModel):
    """Which series of a scrape to keep: a metric name and label filters."""

    model_config = _STRICT

    name: str = Field(min_length=1, description="the metric's name, e.g. 'http_requests_total'")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="keep only series with these label values; a value starting with '~' is a "
        "regular expression the whole value must match, e.g. {device: '~eth.*'}",
    )
    sum: bool = Field(default=False, description="add the kept series into one (e.g. every CPU's seconds)")

    @field_validator("labels")
    @classmethod
    def _check_patterns(cls, labels: dict[str, str]) -> dict[str, str]:
        for label, value in labels.items():
            if value.startswith("~"):
                try:
                    re.compile(value[1:])
                except re.error as error:
                    raise custom(
                        "label_pattern",
                        f"label {label}: '{value[1:]}' is not a regular expression ({error})",
                        "write a Python regular expression after '~', e.g. '~eth[0-9]+'",
                    ) from None
        return labels


class PrometheusMonitor(_Monitor):
    """Any exporter's ``/metrics`` (Prometheus text format): counters become per-second rates
    (a reset counts from zero), gauges stay values."""

    type: Literal["prometheus"] = Field(default="prometheus", description="'prometheus': scrape a /metrics endpoint")
    url: str = Field(description="the endpoint, e.g. 'http://10.0.0.5:9100/metrics'")
    series: list[Series] = Field(default_factory=list, description="the series to keep: [{name, labels, sum}]")
    node_exporter: bool = Field(
        default=False,
        description="the endpoint is a node_exporter: also give the host monitor's figures (CPU, load, "
        "memory, network, sockets, disks, open files) and judge them by the host rules",
    )
    timeout_ms: float = Field(default=2000, gt=0, le=60_000, description="how long a scrape may take")
    diagnosis: HostDiagnosis = Field(
        default_factory=HostDiagnosis, description="the host rules' thresholds (node_exporter)"
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise custom(
                "monitor_url",
                f"'{url}' is not an http:// or https:// URL",
                "write the endpoint's full URL, e.g. 'http://127.0.0.1:9100/metrics'",
            )
        if parts.password is not None:
            raise custom(
                "monitor_url_password",
                "the URL holds a password, which would be stored with the run",
                "scrape an endpoint that needs no password (an exporter on the machine's private network)",
            )
        return url


class PostgresMonitor(_Monitor):
    """A PostgreSQL server, through one connection of its own: transactions, the statement mix,
    rows, cache hits, HOT updates, dead tuples and autovacuum per table, connections, locks,
    deadlocks, temp bytes, and on a primary each standby's lag and the xmin it holds back."""

    type: Literal["postgres"] = Field(default="postgres", description="'postgres': watch a PostgreSQL server")
    dsn: str = Field(description="postgresql://USER@HOST:PORT/DATABASE, without a password")
    password_env: str | None = Field(
        default=None,
        description="the environment variable holding the password (read when the run starts, never "
        "stored); default: libpq's own (PGPASSWORD, ~/.pgpass)",
    )
    tables: list[str] = Field(
        default_factory=list, description="tables to follow (schema.table); default: every user table"
    )
    connect_timeout_s: int = Field(default=5, ge=1, le=60, description="how long connecting may take")
    diagnosis: PostgresDiagnosis = Field(
        default_factory=PostgresDiagnosis, description="the PostgreSQL rules' thresholds"
    )

    @field_validator("dsn")
    @classmethod
    def _check_dsn(cls, dsn: str) -> str:
        parts = urlsplit(dsn)
        if parts.scheme not in ("postgresql", "postgres"):
            raise custom(
                "monitor_dsn", f"'{dsn}' is not a postgresql:// URL", "write postgresql://USER@HOST:PORT/DATABASE"
            )
        try:
            password = parts.password
        except ValueError:
            password = None
        if password is not None or "password=" in parts.query:
            raise custom(
                "monitor_dsn_password",
                "the DSN holds a password, which would be stored with the run",
                "leave it out and name the variable that holds it: password_env: PGPASSWORD",
            )
        return dsn


Monitor = Annotated[Union[HostMonitor, PrometheusMonitor, PostgresMonitor], Field(discriminator="type")]


def check_monitor_names(monitors: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validates the plan's list of monitors; a name used twice is a problem at its place."""
    return validate_unique_names(monitors, handler, "monitor")


# --- monitor metrics in conditions -------------------------------------------------------------

_MONITOR_CONDITION = re.compile(
    r"^\s*monitor\.(?P<monitor>[A-Za-z_][A-Za-z0-9_-]*)\.(?P<metric>[^\s<>=]+)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>-?[0-9]+(?:\.[0-9]+)?)\s*%?\s*(?:for\s+(?P<for_s>[0-9]+)\s*s)?\s*$"
)

MONITOR_CONDITION_HINT = (
    "write monitor.NAME.METRIC OP VALUE [for Ns], e.g. 'monitor.db.cpu.busy_percent > 95 for 10s' or "
    "'monitor.pg.replication_lag_s > 5'; the metrics are listed in docs/plan-reference.md"
)


@dataclass(frozen=True)
class MonitorCondition:
    """``monitor.NAME.METRIC OP VALUE [for Ns]``: holds at a second when the monitor's metric
    passes the comparison, for ``for_s`` seconds in a row (None: the rule's own window)."""

    monitor: str
    metric: str
    op: str
    value: float
    for_s: int | None
    text: str

    def holds(self, measured: float) -> bool:
        return {
            "<": measured < self.value,
            "<=": measured <= self.value,
            ">": measured > self.value,
            ">=": measured >= self.value,
        }[self.op]


def is_monitor_condition(text: str) -> bool:
    return text.strip().startswith("monitor.")


def parse_monitor_condition(text: str) -> MonitorCondition:
    """Parses a monitor condition; ValueError saying what is wrong."""
    match = _MONITOR_CONDITION.match(text)
    if match is None:
        raise ValueError(f"'{text.strip()}' is not a monitor condition")
    for_s = match.group("for_s")
    if for_s is not None and not 1 <= int(for_s) <= 3600:
        raise ValueError(f"'for {for_s}s': between 1 and 3600 seconds")
    return MonitorCondition(
        monitor=match.group("monitor"),
        metric=match.group("metric"),
        op=match.group("op"),
        value=float(match.group("value")),
        for_s=None if for_s is None else int(for_s),
        text=text.strip(),
    )


# --- monitors given on the command line -------------------------------------------------------

MONITOR_FLAG_HINT = (
    "write --monitor NAME=host (this machine), NAME=http://HOST:9100/metrics (a node_exporter: that machine's host "
    "figures) or NAME=postgresql://USER@HOST:PORT/DATABASE (password from PGPASSWORD or ~/.pgpass)"
)


def monitor_from_flag(text: str) -> HostMonitor | PrometheusMonitor | PostgresMonitor:
    """A monitor from ``--monitor NAME=SPEC``; ValueError with what is wrong (hint:
    :data:`MONITOR_FLAG_HINT`).

    >>> monitor_from_flag("db=postgresql://app@127.0.0.1/game").type
    'postgres'
    >>> monitor_from_flag("web=http://10.0.0.7:9100/metrics").node_exporter
    True
    """
    name, equals, spec = text.partition("=")
    if not equals or not name.strip() or not spec.strip():
        raise ValueError(f"'{text}' is not NAME=SOURCE")
    name, spec = name.strip(), spec.strip()
    data: dict[str, Any]
    if spec == "host":
        data = {"name": name, "type": "host"}
    elif spec.startswith(("http://", "https://")):
        data = {"name": name, "type": "prometheus", "url": spec, "node_exporter": True}
    elif spec.startswith(("postgresql://", "postgres://")):
        data = {"name": name, "type": "postgres", "dsn": spec}
    else:
        raise ValueError(f"'{spec}' is not a source (host, an http:// URL or a postgresql:// DSN)")
    try:
        if data["type"] == "host":
            return HostMonitor.model_validate(data)
        if data["type"] == "prometheus":
            return PrometheusMonitor.model_validate(data)
        return PostgresMonitor.model_validate(data)
    except ValidationError as error:
        details = error.errors()[0]
        message = details.get("ctx", {}).get("detail") or details["msg"]
        raise ValueError(f"--monitor {name}: {message}") from None
