"""A node_exporter's series as the host source's figures, so a remote machine is watched and
judged like the one Horde runs on (the ``prometheus`` source with ``node_exporter: true``).

node_exporter reads the same /proc files the host source does, on its own machine; the figures
have the host source's names (:data:`horde.plan.monitor_figures.NODE_EXPORTER_FIGURES`). Sockets
come from ``sockstat`` (time-wait) and ``netstat`` (established), node_exporter's default
collectors: the other TCP states are not given.
"""

from __future__ import annotations

from horde.monitors.exposition import Family
from horde.monitors.host import cpu_percents, link_figures
from horde.monitors.source import CounterRates

_NETWORK = {
    "node_network_receive_bytes_total": "rx_bytes",
    "node_network_transmit_bytes_total": "tx_bytes",
    "node_network_receive_packets_total": "rx_packets",
    "node_network_transmit_packets_total": "tx_packets",
}
_DISK = {
    "node_disk_reads_completed_total": "reads",
    "node_disk_writes_completed_total": "writes",
    "node_disk_read_bytes_total": "read_bytes",
    "node_disk_written_bytes_total": "write_bytes",
    "node_disk_io_time_seconds_total": "busy_s",
}
_GAUGES = {
    "node_load1": "load.1m",
    "node_load5": "load.5m",
    "node_load15": "load.15m",
    "node_sockstat_TCP_tw": "tcp.time_wait",
    "node_netstat_Tcp_CurrEstab": "tcp.established",
    "node_filefd_allocated": "files.open",
    "node_filefd_maximum": "files.max",
    "node_memory_MemTotal_bytes": "memory.total_bytes",
    "node_memory_MemAvailable_bytes": "memory.available_bytes",
}


def _samples(families: dict[str, Family], name: str) -> list[tuple[dict[str, str], float]]:
    family = families.get(name)
    return [] if family is None else [(labels, value) for series, labels, value in family.samples if series == name]


class NodeFigures:
    """Host figures from successive scrapes of one node_exporter."""

    def __init__(self, link_speed_mbps: float | None) -> None:
        self._rates = CounterRates()
        self._link_speed_mbps = link_speed_mbps

    def read(self, families: dict[str, Family], now: float) -> dict[str, float]:
        values: dict[str, float] = {}
        for name, figure in _GAUGES.items():
            for _labels, value in _samples(families, name)[:1]:
                values[figure] = value
        if "memory.total_bytes" in values and "memory.available_bytes" in values:
            total, available = values["memory.total_bytes"], values["memory.available_bytes"]
            values["memory.used_bytes"] = total - available
            values["memory.used_percent"] = 100.0 * (total - available) / total if total else 0.0
        values.update(self._cpu(families, now))
        values.update(self._network(families, now))
        values.update(self._disks(families, now))
        return values

    def _cpu(self, families: dict[str, Family], now: float) -> dict[str, float]:
        seconds: dict[str, float] = {}
        cpus: set[str] = set()
        for labels, value in _samples(families, "node_cpu_seconds_total"):
            mode = labels.get("mode", "")
            seconds[mode] = seconds.get(mode, 0.0) + value
            cpus.add(labels.get("cpu", ""))
        if not seconds:
            return {}
        values = {"cpu.count": float(len(cpus))}
        spent = {mode: self._rates.rate(f"cpu.{mode}", value, now) for mode, value in seconds.items()}
        if all(rate is not None for rate in spent.values()):
            values.update(cpu_percents({mode: rate or 0.0 for mode, rate in spent.items()}))
        return values

    def _network(self, families: dict[str, Family], now: float) -> dict[str, float]:
        values: dict[str, float] = {}
        for name, what in _NETWORK.items():
            for labels, value in _samples(families, name):
                device = labels.get("device", "")
                rate = self._rates.rate(f"net.{device}.{what}", value, now)
                if rate is None:
                    continue
                values[f"net.{device}.{what}_per_s"] = rate
                if device != "lo":
                    values[f"net.{what}_per_s"] = values.get(f"net.{what}_per_s", 0.0) + rate
        speeds = {
            labels.get("device", ""): value * 8 / 1e6
            for labels, value in _samples(families, "node_network_speed_bytes")
        }
        for device in {key.split(".")[1] for key in values if key.count(".") == 2}:
            rx, tx = values.get(f"net.{device}.rx_bytes_per_s"), values.get(f"net.{device}.tx_bytes_per_s")
            if rx is not None and tx is not None:
                values.update(link_figures(f"net.{device}", rx, tx, self._link_speed_mbps or speeds.get(device)))
        return values

    def _disks(self, families: dict[str, Family], now: float) -> dict[str, float]:
        values: dict[str, float] = {}
        for name, what in _DISK.items():
            for labels, value in _samples(families, name):
                device = labels.get("device", "")
                if device.startswith(("loop", "ram", "zram")):
                    continue
                rate = self._rates.rate(f"disk.{device}.{what}", value, now)
                if rate is None:
                    continue
                if what == "busy_s":
                    values[f"disk.{device}.busy_percent"] = min(100.0, rate * 100.0)
                else:
                    values[f"disk.{device}.{what}_per_s"] = rate
        return values
