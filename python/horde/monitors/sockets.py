"""TCP sockets by state, counted without reading /proc/net/tcp.

/proc/net/tcp is text the kernel formats line by line: about 12 µs of CPU per socket on this
project's test machine, so a generator holding 20,000 connections would spend a quarter of a
core each second just counting them, on the CPU the engine needs (bench/monitors.py measured
12 ms a sample with 600 sockets). A load test's sockets are nearly all established or in
time-wait, and the kernel keeps both counts: ``CurrEstab`` in /proc/net/snmp (established and
close-wait together) and ``tw`` in /proc/net/sockstat. The other states, few, are counted from
a sock_diag netlink dump (what ``ss`` uses) that asks for them alone: fixed records of which
only the state byte is read. Where netlink is not allowed (some sandboxes), the host source
falls back to /proc/net/tcp.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

#: The kernel's TCP states (include/net/tcp_states.h), by number.
STATES = {
    1: "established",
    2: "syn_sent",
    3: "syn_recv",
    4: "fin_wait1",
    5: "fin_wait2",
    6: "time_wait",
    7: "close",
    8: "close_wait",
    9: "last_ack",
    10: "listen",
    11: "closing",
}

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_HEADER = struct.Struct("=LHHLL")  # nlmsghdr: length, type, flags, sequence, port id
# inet_diag_req_v2: family, protocol, extensions, pad, states (a bit per state), then a zeroed
# inet_diag_sockid (48 bytes): every socket of the family.
_REQUEST = struct.Struct("=BBBBL48x")
#: Every state but established (1) and time-wait (6): the kernel counts those itself.
_FEW_STATES = 0xFFFFFFFF & ~((1 << 1) | (1 << 6))


#: The pseudo-state under which a dump counts fin-wait-2 sockets that the kernel already holds
#: as time-wait mini-sockets (closed by their owner): /proc/net/sockstat's ``tw`` counts them.
_FIN_WAIT2_MINISOCKET = -5
#: inet_diag_msg's timer of a time-wait mini-socket.
_TIME_WAIT_TIMER = 3


def _dump(family: int, states: int) -> dict[int, int]:
    """Sockets of one address family in ``states`` (a bit per state number), by state, from
    one sock_diag dump; fin-wait-2 mini-sockets also under _FIN_WAIT2_MINISOCKET."""
    counts: dict[int, int] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as link:
        body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, states)
        link.sendall(
            _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + body
        )
        while True:
            data = link.recv(1 << 17)
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, kind = _HEADER.unpack_from(data, offset)[:2]
                if kind == _NLMSG_DONE:
                    return counts
                if kind == _NLMSG_ERROR:
                    (error,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                    raise OSError(-error, f"sock_diag refused the dump ({-error})")
                # inet_diag_msg: family, state, timer.
                state, timer = data[offset + _HEADER.size + 1], data[offset + _HEADER.size + 2]
                counts[state] = counts.get(state, 0) + 1
                if state == 5 and timer == _TIME_WAIT_TIMER:
                    counts[_FIN_WAIT2_MINISOCKET] = counts.get(_FIN_WAIT2_MINISOCKET, 0) + 1
                offset += (length + 3) & ~3
            if not data:
                return counts


def _kernel_counts(proc: Path) -> tuple[int, int]:
    """(CurrEstab: established and close-wait sockets, time-wait sockets) as the kernel keeps them."""
    lines = [line.split() for line in (proc / "net" / "snmp").read_text().splitlines() if line.startswith("Tcp:")]
    established = int(dict(zip(lines[0], lines[1]))["CurrEstab"])
    sockstat = (proc / "net" / "sockstat").read_text().split()
    time_wait = int(sockstat[sockstat.index("tw", sockstat.index("TCP:")) + 1])
    return established, time_wait


def tcp_states(proc: Path = Path("/proc")) -> dict[str, int]:
    """Every TCP socket of this machine's network namespace (IPv4 and IPv6) by state name.
    OSError when netlink's sock_diag cannot be used.

    >>> counts = tcp_states()
    >>> set(counts) == set(STATES.values()) and all(count >= 0 for count in counts.values())
    True
    """
    counts = dict.fromkeys(STATES.values(), 0)
    minisockets = 0
    for family in (socket.AF_INET, socket.AF_INET6):
        for state, count in _dump(family, _FEW_STATES).items():
            if state in STATES:
                counts[STATES[state]] += count
            elif state == _FIN_WAIT2_MINISOCKET:
                minisockets += count
    current, time_wait_sockets = _kernel_counts(proc)
    # CurrEstab counts close-wait sockets too (RFC 1213's tcpCurrEstab), and sockstat's time-wait
    # sockets the fin-wait-2 ones kept as mini-sockets: the dump counted both by their state.
    counts["established"] = max(0, current - counts["close_wait"])
    counts["time_wait"] = max(0, time_wait_sockets - minisockets)
    return counts
