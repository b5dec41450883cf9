"""An access log written from a known truth, for the `horde profile` plan tests
(tests/test_profile_truth.py, tests/test_profile_e2e.py): endpoints with their exact counts
and response times (among them a rare but slow one that costs the server most, and one rare
and slow enough to matter only by time), ids and query strings in their paths, a day's shape
of three hours with a known peak hour (and, in PEAK_ENDPOINTS, an endpoint that runs only in the
peak hour and one only off it), and clients pacing their requests a known time apart.

Everything a test checks against is computed here, from the lines as written (whole-second
times included), never by the code under test.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from profile_logs import T0, Hit, combined_line, write_log


@dataclass(frozen=True)
class TruthEndpoint:
    """One endpoint: its name as `horde profile` templates it, its requests per 1,000, the
    time each takes, a request's target given a random source, and the hours of the log it
    runs in (None: all, in the log's mix)."""

    name: str
    method: str
    per_1000: int
    ms: float
    target: Callable[[random.Random], str]
    hours: tuple[int, ...] | None = None


def _items(rng: random.Random) -> str:
    return f"/api/items/{rng.randrange(1, 5000)}?page={rng.randrange(1, 9)}"


#: The default truth. Shares of time: refunds 54.7 % at 4.8 % of the requests; exports 10.9 %
#: at 0.8 %; ping and the stylesheet under 1 % by both (the only ones a plan may leave out).
ENDPOINTS: tuple[TruthEndpoint, ...] = (
    TruthEndpoint("GET /api/items/{id}?page", "GET", 500, 5.0, _items),
    TruthEndpoint("GET /api/search?q", "GET", 250, 8.0, lambda rng: f"/api/search?q=term{rng.randrange(40)}"),
    TruthEndpoint("POST /api/orders", "POST", 150, 20.0, lambda rng: "/api/orders"),
    TruthEndpoint(
        "POST /api/refunds/{id}", "POST", 48, 250.0, lambda rng: f"/api/refunds/{rng.randrange(10**5, 10**6)}"
    ),
    TruthEndpoint("GET /api/health", "GET", 30, 1.0, lambda rng: "/api/health"),
    TruthEndpoint("GET /api/export/{id}", "GET", 8, 300.0, lambda rng: f"/api/export/{rng.randrange(1, 50)}"),
    TruthEndpoint("GET /api/ping", "GET", 9, 1.0, lambda rng: "/api/ping"),
    TruthEndpoint("GET /static/site.css", "GET", 5, 2.0, lambda rng: "/static/site.css"),
)

#: The default truth with a nightly batch that runs only in the peak hour (3 % of the log, 6 % of
#: that hour) and a report read only off-peak (3 % of the log, none in the peak hour), the items
#: endpoint the fewer.
PEAK_ENDPOINTS: tuple[TruthEndpoint, ...] = (
    TruthEndpoint("GET /api/items/{id}?page", "GET", 440, 5.0, _items),
    *ENDPOINTS[1:],
    TruthEndpoint("POST /api/settlements/batch", "POST", 30, 40.0, lambda rng: "/api/settlements/batch", hours=(1,)),
    TruthEndpoint("GET /api/reports/nightly", "GET", 30, 30.0, lambda rng: "/api/reports/nightly", hours=(0, 2)),
)

#: Requests in each hour of the log (the second is the peak), and how far apart one client's
#: requests are (each hour has its own clients: requests × apart / 3,600 of them).
HOURS: tuple[int, ...] = (2000, 5000, 3000)
APART_S = 7.2


@dataclass
class Truth:
    """What the log holds, computed from its lines."""

    path: Path
    counts: dict[str, int]
    time_ms: dict[str, float]
    endpoints: dict[str, TruthEndpoint]
    peak_hour_per_s: float
    think_ms: list[float] = field(default_factory=list)
    #: Minute since the epoch (of the logged, whole-second time) -> endpoint -> requests.
    per_minute: dict[int, dict[str, int]] = field(default_factory=dict)

    def peak_minute(self) -> int:
        """The busiest minute, the earliest on a tie."""
        return max(sorted(self.per_minute), key=lambda minute: sum(self.per_minute[minute].values()))

    def peak_hour_first(self) -> int:
        """The first minute of the busiest clock hour (the log's hours are whole clock hours)."""
        hours: dict[int, int] = {}
        for minute, counts in self.per_minute.items():
            hours[minute // 60] = hours.get(minute // 60, 0) + sum(counts.values())
        return max(sorted(hours), key=lambda hour: hours[hour]) * 60

    def mean_ms_of(self, counts: dict[str, int]) -> float:
        """The mean time of a mix of requests (endpoint -> requests)."""
        return sum(count * self.endpoints[name].ms for name, count in counts.items()) / sum(counts.values())

    def in_minutes(self, first: int, minutes: int) -> dict[str, int]:
        """Each endpoint's requests in the minutes from ``first``, every endpoint named."""
        counts = dict.fromkeys(self.counts, 0)
        for minute in range(first, first + minutes):
            for name, count in self.per_minute.get(minute, {}).items():
                counts[name] += count
        return counts

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    def share_by_count(self, name: str) -> float:
        return self.counts[name] / self.requests

    def share_by_time(self, name: str) -> float:
        return self.time_ms[name] / sum(self.time_ms.values())

    def mean_ms(self, names: list[str]) -> float:
        return sum(self.time_ms[name] for name in names) / sum(self.counts[name] for name in names)

    def mean_think_ms(self) -> float:
        return math.fsum(self.think_ms) / len(self.think_ms)


def write_truth_log(
    path: Path, endpoints: tuple[TruthEndpoint, ...] = ENDPOINTS, hours: tuple[int, ...] = HOURS, seed: int = 11
) -> Truth:
    """The log at ``path``: every endpoint's exact count (per_1000 of the whole), drawn in a
    shuffled order so each hour holds about the log's mix; an endpoint given ``hours`` has its
    requests spread evenly over those hours only."""
    rng = random.Random(seed)
    total = sum(hours)
    assert sum(endpoint.per_1000 for endpoint in endpoints) == 1000 and total % 1000 == 0
    pool = [
        endpoint for endpoint in endpoints if endpoint.hours is None for _ in range(endpoint.per_1000 * total // 1000)
    ]
    rng.shuffle(pool)
    only: dict[int, list[TruthEndpoint]] = {hour: [] for hour in range(len(hours))}
    for endpoint in endpoints:
        if endpoint.hours is not None:
            for k in range(endpoint.per_1000 * total // 1000):
                only[endpoint.hours[k % len(endpoint.hours)]].append(endpoint)
    per_minute: dict[int, dict[str, int]] = {}
    lines: list[str] = []
    counts = {endpoint.name: 0 for endpoint in endpoints}
    time_ms = {endpoint.name: 0.0 for endpoint in endpoints}
    think: list[float] = []
    index = 0
    for hour, requests in enumerate(hours):
        clients = round(requests * APART_S / 3600)
        last: dict[int, tuple[int, float]] = {}
        drawn = only[hour] + pool[index : index + requests - len(only[hour])]
        index += requests - len(only[hour])
        if only[hour]:  # (the default truth draws as it always did)
            rng.shuffle(drawn)
        for i in range(requests):
            endpoint = drawn[i]
            t = T0 + hour * 3600 + i * 3600 / requests
            minute = per_minute.setdefault(int(t) // 60, {})
            minute[endpoint.name] = minute.get(endpoint.name, 0) + 1
            client = i % clients
            if client in last:  # the gap between whole seconds, less the last request's time
                think.append(max(0.0, (int(t) - last[client][0]) * 1000.0 - last[client][1]))
            last[client] = (int(t), endpoint.ms)
            counts[endpoint.name] += 1
            time_ms[endpoint.name] += endpoint.ms
            lines.append(
                combined_line(
                    Hit(
                        t,
                        endpoint.method,
                        endpoint.target(rng),
                        seconds=endpoint.ms / 1000.0,
                        client=f"10.{hour}.0.{client}",
                        status=201 if endpoint.method == "POST" else 200,
                    )
                )
            )
    assert index == len(pool)
    write_log(path, lines)
    return Truth(
        path,
        counts,
        time_ms,
        {endpoint.name: endpoint for endpoint in endpoints},
        max(hours) / 3600.0,
        think,
        per_minute,
    )


@dataclass(frozen=True)
class ClientKind:
    """A kind of client: how many, its endpoints (method, target, ms) drawn in turn, how far
    apart its requests are and how many a session makes."""

    name: str
    clients: int
    endpoints: tuple[tuple[str, str, float], ...]
    apart_s: int
    requests: int
    #: Sessions start within ``spread_s`` of ``from_s`` (seconds into the log).
    from_s: int = 0
    spread_s: int = 600


#: Devices writing every 5 s, users reading every 30 s, admins every 60 s (seed 004's profiles).
KINDS: tuple[ClientKind, ...] = (
    ClientKind("devices", 20, (("POST", "/api/telemetry", 5.0),), 5, 100),
    ClientKind(
        "users",
        60,
        (("GET", "/api/items/{n}", 10.0), ("GET", "/api/items/{n}", 10.0), ("GET", "/api/search?q=s{n}", 20.0)),
        30,
        20,
    ),
    ClientKind("admins", 10, (("GET", "/api/reports/{n}", 200.0), ("GET", "/api/users?page={n}", 50.0)), 60, 10),
)


@dataclass(frozen=True)
class KindTruth:
    """One kind as the log holds it: sessions, requests, and the mean think time (ms)."""

    sessions: int
    requests: int
    think_ms: float


def write_kinds_log(path: Path, kinds: tuple[ClientKind, ...] = KINDS) -> dict[str, KindTruth]:
    """Each client one session (its requests ``apart_s`` apart, starts staggered over ten
    minutes), its kind told by nothing but what it does: every client has the same agent."""
    rng = random.Random(3)
    hits: list[Hit] = []
    thinks: dict[str, list[float]] = {kind.name: [] for kind in kinds}
    for k, kind in enumerate(kinds):
        for client in range(kind.clients):
            start = T0 + kind.from_s + rng.randrange(kind.spread_s)
            for i in range(kind.requests):
                method, target, ms = kind.endpoints[i % len(kind.endpoints)]
                hits.append(
                    Hit(
                        start + i * kind.apart_s,
                        method,
                        target.format(n=rng.randrange(1, 999)),
                        seconds=ms / 1000,
                        client=f"10.{k}.{1 + client // 250}.{client % 250}",
                    )
                )
                if i:
                    thinks[kind.name].append(kind.apart_s * 1000.0 - kind.endpoints[(i - 1) % len(kind.endpoints)][2])
    hits.sort(key=lambda hit: hit.t)
    write_log(path, [combined_line(hit) for hit in hits])
    return {
        kind.name: KindTruth(
            kind.clients, kind.clients * kind.requests, math.fsum(thinks[kind.name]) / len(thinks[kind.name])
        )
        for kind in kinds
    }
