"""The figures each kind of monitor gives: the one list of their names.

The sources (:mod:`horde.monitors.host`, :mod:`~horde.monitors.node_exporter`,
:mod:`~horde.monitors.postgres`) give these names and no others (their tests check every figure
a real reading gives against these lists, and docs/plan-reference.md against them); the plan
check refuses a condition ``monitor.NAME.METRIC`` whose monitor can never give ``METRIC``, so an
autostop rule cannot silently never fire. A word in capitals stands for a subject the source
names: an interface (``IF``), a block device (``DEV``), a table's schema and name, a standby.
A ``prometheus`` monitor's series are free-form (their names are the exporter's): only a
node_exporter's host figures are known, beside the series it keeps.

>>> figure_matches("net.IF.link_percent", "net.eth0.100.link_percent")
True
>>> unknown_figure(HostMonitor(name="db"), "cpu_percent")
("monitor db (host) never gives 'cpu_percent'", 'did you mean cpu.busy_percent, cpu.user_percent, cpu.system_percent? A host monitor gives the figures listed in docs/plan-reference.md (Monitors, Figures)')
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

from horde.plan.monitors import HostMonitor, PostgresMonitor, PrometheusMonitor

_CPU = ("busy", "user", "system", "iowait", "irq", "softirq", "steal", "idle")
_NET = ("rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s")
#: What a node_exporter's default collectors give of the sockets: sockstat's time-wait count and
#: netstat's CurrEstab. The other states are only counted on the machine Horde runs on.
NODE_EXPORTER_TCP = ("tcp.established", "tcp.time_wait")

#: The ``host`` source's figures (rates per second over the interval since the last reading):
#: shares of all CPUs' time (user with nice; busy is 100 less idle and iowait); load; memory
#: (used is total less available); per interface, then every interface but loopback added up
#: (link_percent is the busier direction's share of the link, where its speed is known); IPv4
#: and IPv6 TCP sockets by state; per block device (busy_percent: time with IO in flight); the
#: system's file handles.
HOST_FIGURES: tuple[str, ...] = (
    *(f"cpu.{mode}_percent" for mode in _CPU),
    "cpu.count",
    "load.1m",
    "load.5m",
    "load.15m",
    "memory.total_bytes",
    "memory.available_bytes",
    "memory.used_bytes",
    "memory.used_percent",
    *(f"net.IF.{what}" for what in (*_NET, "link_mbps", "link_percent")),
    *(f"net.{what}" for what in _NET),
    *NODE_EXPORTER_TCP,
    "tcp.close_wait",
    "tcp.syn_sent",
    "tcp.syn_recv",
    "tcp.fin_wait1",
    "tcp.fin_wait2",
    "tcp.last_ack",
    "tcp.closing",
    "tcp.listen",
    *(
        f"disk.DEV.{what}"
        for what in ("reads_per_s", "writes_per_s", "read_bytes_per_s", "write_bytes_per_s", "busy_percent")
    ),
    "files.open",
    "files.max",
)

#: A node_exporter's host figures: the host source's, sockets in two states only.
NODE_EXPORTER_FIGURES: tuple[str, ...] = tuple(
    figure for figure in HOST_FIGURES if not figure.startswith("tcp.") or figure in NODE_EXPORTER_TCP
)

_TABLE = ("dead_tuples", "live_tuples", "dead_tuples_per_s", "autovacuum_runs", "autoanalyze_runs")

#: The ``postgres`` source's figures (rates per second; counts in the interval since the last
#: reading): transactions; the statement mix (from pg_stat_statements, from_pg_stat_statements
#: 1, else the tuple counters, 0); rows (returned: read by sequential scans and index entries
#: returned by index scans, pg_stat_database's tup_returned; fetched: live rows fetched by index
#: scans, tup_fetched); HOT updates among updates, buffer hits among block reads, temp file bytes,
#: deadlocks; dead and live tuples of the followed tables, then per table; client connections by
#: state and max_connections; locks not granted; on a primary per standby its lags and the age
#: of the xmin its feedback holds, then the worst standby's (and how many stream); on a standby
#: in_recovery 1 and how long ago the last replayed transaction committed on the primary.
POSTGRES_FIGURES: tuple[str, ...] = (
    "transactions_per_s",
    "commits_per_s",
    "rollbacks_per_s",
    *(f"statements.{verb}_per_s" for verb in ("select", "insert", "update", "delete", "other")),
    "statements.from_pg_stat_statements",
    *(f"rows.{what}_per_s" for what in ("returned", "fetched", "inserted", "updated", "deleted")),
    "hot_update_percent",
    "cache_hit_percent",
    "blocks.accessed_per_s",
    "temp_bytes_per_s",
    "deadlocks",
    *_TABLE,
    *(f"tables.SCHEMA.TABLE.{what}" for what in _TABLE),
    *(f"connections.{state}" for state in ("active", "idle", "idle_in_transaction", "other", "total", "max")),
    "locks_waiting",
    *(
        f"replication.STANDBY.{what}"
        for what in ("write_lag_s", "flush_lag_s", "replay_lag_s", "replay_lag_bytes", "xmin_age")
    ),
    "replication_lag_s",
    "replication_lag_bytes",
    "standby_xmin_age",
    "standbys",
    "in_recovery",
    "replay_delay_s",
)

_SUBJECT = re.compile(r"(?<![a-z0-9_])[A-Z]+(?![a-z0-9_])")


@lru_cache(maxsize=None)
def _pattern(figure: str) -> re.Pattern[str]:
    parts = _SUBJECT.split(figure)
    return re.compile(".+".join(re.escape(part) for part in parts) + r"\Z")


def figure_matches(figure: str, metric: str) -> bool:
    """Whether ``metric`` is ``figure`` with its subjects (words in capitals) named."""
    return _pattern(figure).match(metric) is not None


def _close(metric: str, names: list[str]) -> list[str]:
    """The three names most like ``metric``; of names about as alike, the first listed (the
    lists put the most used first: cpu.busy_percent before cpu.irq_percent)."""
    scored = [
        (round(difflib.SequenceMatcher(None, metric, name).ratio(), 1), -index, name)
        for index, name in enumerate(names)
    ]
    return [name for score, _, name in sorted(scored, reverse=True)[:3] if score >= 0.6]


def known_figures(monitor: HostMonitor | PrometheusMonitor | PostgresMonitor) -> tuple[str, ...] | None:
    """The figures a monitor can give; None for a prometheus monitor's free-form series alone."""
    if isinstance(monitor, HostMonitor):
        return HOST_FIGURES
    if isinstance(monitor, PostgresMonitor):
        return POSTGRES_FIGURES
    return NODE_EXPORTER_FIGURES if monitor.node_exporter else None


def unknown_figure(monitor: HostMonitor | PrometheusMonitor | PostgresMonitor, metric: str) -> tuple[str, str] | None:
    """(message, hint) when ``monitor`` can never give ``metric``, else None. A node_exporter
    also gives the series it keeps (a series' name, or the name and its labels' values)."""
    figures = known_figures(monitor)
    if figures is None or any(figure_matches(figure, metric) for figure in figures):
        return None
    kept: list[str] = []
    if isinstance(monitor, PrometheusMonitor):
        kept = [series.name for series in monitor.series]
        if any(metric == name or metric.startswith(name + ".") for name in kept):
            return None
    kind = "node_exporter" if isinstance(monitor, PrometheusMonitor) else monitor.type
    close = _close(metric, [*figures, *kept])
    listed = f"A {kind} monitor gives the figures listed in docs/plan-reference.md (Monitors, Figures)"
    if isinstance(monitor, PrometheusMonitor):
        listed += " and the series it keeps"
    if metric.startswith("tcp.") and kind == "node_exporter":
        listed += f"; of the sockets a node_exporter gives {' and '.join(NODE_EXPORTER_TCP)} only"
    if isinstance(monitor, PostgresMonitor) and metric.startswith(
        ("cpu", "load", "memory", "net", "tcp", "disk", "files")
    ):
        listed += (
            "; it reads the database's statistics, not its machine's: watch that with a host or node_exporter monitor"
        )
    hint = (f"did you mean {', '.join(close)}? " if close else "") + listed
    return f"monitor {monitor.name} ({kind}) never gives '{metric}'", hint
