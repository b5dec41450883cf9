"""The ``host`` source: the machine Horde runs on, read from /proc and /sys.

Its figures are :data:`horde.plan.monitor_figures.HOST_FIGURES` (rates per second over the
interval since the last reading): CPU shares, load, memory, network per interface and added up,
TCP sockets by state (counted as :mod:`horde.monitors.sockets` says, at a cost that does not grow
with the established and time-wait sockets), disks, open files.

A remote machine is read the same way through its node_exporter (:mod:`horde.monitors.node_exporter`).
"""

from __future__ import annotations

from pathlib import Path

from horde.monitors.sockets import tcp_states
from horde.monitors.source import CounterRates, SourceUnavailable
from horde.plan.monitors import HostMonitor

#: /proc/net/tcp's state codes.
TCP_STATES = {
    "01": "established",
    "02": "syn_sent",
    "03": "syn_recv",
    "04": "fin_wait1",
    "05": "fin_wait2",
    "06": "time_wait",
    "07": "close",
    "08": "close_wait",
    "09": "last_ack",
    "0A": "listen",
    "0B": "closing",
}
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# /proc/diskstats counts 512-byte sectors whatever the device's own sector size.
_SECTOR_BYTES = 512


def cpu_percents(times: dict[str, float]) -> dict[str, float]:
    """Shares of CPU time from the time each mode took over an interval (any unit).

    >>> cpu_percents({"user": 30, "nice": 10, "system": 10, "idle": 40, "iowait": 10, "irq": 0,
    ...               "softirq": 0, "steal": 0})["cpu.busy_percent"]
    50.0
    """
    total = sum(times.values())
    if total <= 0:
        return {}
    share = {mode: 100.0 * value / total for mode, value in times.items()}
    return {
        "cpu.user_percent": share.get("user", 0.0) + share.get("nice", 0.0),
        "cpu.system_percent": share.get("system", 0.0),
        "cpu.iowait_percent": share.get("iowait", 0.0),
        "cpu.irq_percent": share.get("irq", 0.0),
        "cpu.softirq_percent": share.get("softirq", 0.0),
        "cpu.steal_percent": share.get("steal", 0.0),
        "cpu.idle_percent": share.get("idle", 0.0),
        "cpu.busy_percent": max(0.0, 100.0 - share.get("idle", 0.0) - share.get("iowait", 0.0)),
    }


def link_figures(
    prefix: str, rx_bytes_per_s: float, tx_bytes_per_s: float, speed_mbps: float | None
) -> dict[str, float]:
    """An interface's link speed and how much of it the busier direction uses."""
    if speed_mbps is None or speed_mbps <= 0:
        return {}
    busiest = max(rx_bytes_per_s, tx_bytes_per_s) * 8 / 1e6
    return {f"{prefix}.link_mbps": speed_mbps, f"{prefix}.link_percent": 100.0 * busiest / speed_mbps}


class HostSource:
    """This machine's figures from /proc (Linux). ``root`` is for tests of another /proc."""

    kind = "host"

    def __init__(self, monitor: HostMonitor, root: Path = Path("/")) -> None:
        self.name = monitor.name
        self._interfaces = set(monitor.interfaces)
        self._disks = set(monitor.disks)
        self._link_speed_mbps = monitor.diagnosis.link_speed_mbps
        self._proc = root / "proc"
        self._sys = root / "sys"
        self._rates = CounterRates()
        self._cpu_last: dict[str, float] | None = None
        # Sockets are counted through netlink (horde.monitors.sockets: /proc/net/tcp costs CPU per
        # socket); a /proc of another root (tests) is read as files.
        self._netlink = root == Path("/")

    def open(self) -> None:
        if not (self._proc / "stat").exists():
            raise SourceUnavailable(f"{self._proc / 'stat'} is missing: the host source reads Linux's /proc")

    def close(self) -> None:
        pass

    def read(self, now: float) -> dict[str, float]:
        try:
            values: dict[str, float] = {}
            values.update(self._cpu())
            values.update(self._load())
            values.update(self._memory())
            values.update(self._network(now))
            values.update(self._tcp())
            values.update(self._disks_read(now))
            values.update(self._files())
            return values
        except (OSError, ValueError, IndexError) as error:
            raise SourceUnavailable(f"reading /proc failed: {error}") from error

    def _cpu(self) -> dict[str, float]:
        lines = (self._proc / "stat").read_text().splitlines()
        fields = lines[0].split()[1:]
        times = {name: float(value) for name, value in zip(_CPU_FIELDS, fields)}
        count = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
        last, self._cpu_last = self._cpu_last, times
        values = {"cpu.count": float(count)}
        if last is not None:
            values.update(cpu_percents({mode: max(0.0, times[mode] - last.get(mode, 0.0)) for mode in times}))
        return values

    def _load(self) -> dict[str, float]:
        one, five, fifteen = (self._proc / "loadavg").read_text().split()[:3]
        return {"load.1m": float(one), "load.5m": float(five), "load.15m": float(fifteen)}

    def _memory(self) -> dict[str, float]:
        info: dict[str, float] = {}
        for line in (self._proc / "meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                info[key] = float(rest.split()[0]) * 1024
        total, available = info["MemTotal"], info["MemAvailable"]
        return {
            "memory.total_bytes": total,
            "memory.available_bytes": available,
            "memory.used_bytes": total - available,
            "memory.used_percent": 100.0 * (total - available) / total,
        }

    def _speed_mbps(self, interface: str) -> float | None:
        if self._link_speed_mbps is not None:
            return self._link_speed_mbps
        try:
            speed = float((self._sys / "class" / "net" / interface / "speed").read_text().strip())
        except (OSError, ValueError):
            return None  # loopback, virtual and down interfaces have none
        return speed if speed > 0 else None

    def _network(self, now: float) -> dict[str, float]:
        values: dict[str, float] = {}
        totals: dict[str, float] = {}
        for line in (self._proc / "net" / "dev").read_text().splitlines()[2:]:
            interface, _, counters = line.partition(":")
            interface = interface.strip()
            if self._interfaces and interface not in self._interfaces:
                continue
            fields = counters.split()
            raw = {"rx_bytes": fields[0], "rx_packets": fields[1], "tx_bytes": fields[8], "tx_packets": fields[9]}
            rates = {
                what: self._rates.rate(f"net.{interface}.{what}", float(value), now) for what, value in raw.items()
            }
            for what, rate in rates.items():
                if rate is None:
                    continue
                values[f"net.{interface}.{what}_per_s"] = rate
                if interface != "lo":
                    totals[f"net.{what}_per_s"] = totals.get(f"net.{what}_per_s", 0.0) + rate
            if rates["rx_bytes"] is not None and rates["tx_bytes"] is not None:
                values.update(
                    link_figures(f"net.{interface}", rates["rx_bytes"], rates["tx_bytes"], self._speed_mbps(interface))
                )
        values.update(totals)
        return values

    def _tcp(self) -> dict[str, float]:
        if self._netlink:
            try:
                counted = tcp_states(self._proc)
                return {f"tcp.{state}": float(count) for state, count in counted.items() if state != "close"}
            except OSError:
                self._netlink = False  # not allowed here (a sandbox): /proc/net/tcp from now on
        counts = dict.fromkeys(TCP_STATES.values(), 0)
        for name in ("tcp", "tcp6"):
            try:
                text = (self._proc / "net" / name).read_text()
            except FileNotFoundError:
                continue  # a kernel without IPv6
            for line in text.splitlines()[1:]:
                state = TCP_STATES.get(line.split(None, 4)[3])
                if state is not None:
                    counts[state] += 1
        return {f"tcp.{state}": float(count) for state, count in counts.items() if state != "close"}

    def _whole_disks(self) -> set[str]:
        try:
            names = {path.name for path in (self._sys / "block").iterdir()}
        except OSError:
            return set()
        return {name for name in names if not name.startswith(("loop", "ram", "zram"))}

    def _disks_read(self, now: float) -> dict[str, float]:
        wanted = self._disks or self._whole_disks()
        values: dict[str, float] = {}
        for line in (self._proc / "diskstats").read_text().splitlines():
            fields = line.split()
            device = fields[2]
            if device not in wanted:
                continue
            raw = {
                "reads": float(fields[3]),
                "read_bytes": float(fields[5]) * _SECTOR_BYTES,
                "writes": float(fields[7]),
                "write_bytes": float(fields[9]) * _SECTOR_BYTES,
                "busy_ms": float(fields[12]),
            }
            for what, value in raw.items():
                rate = self._rates.rate(f"disk.{device}.{what}", value, now)
                if rate is None:
                    continue
                if what == "busy_ms":
                    values[f"disk.{device}.busy_percent"] = min(100.0, rate / 10.0)  # ms per s → percent
                else:
                    values[f"disk.{device}.{what}_per_s"] = rate
        return values

    def _files(self) -> dict[str, float]:
        allocated, unused, maximum = (self._proc / "sys" / "fs" / "file-nr").read_text().split()[:3]
        return {"files.open": float(allocated) - float(unused), "files.max": float(maximum)}
