"""Simulated servers for the steering's tests: a c-server first-come-first-served queue, driven
one second at a time by an open model (uniform or Poisson arrivals at a rate) or a closed one
(N VUs, each sending its next request when the last is answered, after an optional think time).
Each second becomes a snapshot whose histogram holds the latencies of the requests completed in
it, so a steering reads it as it reads the engine's.

The known answers come from outside the steering: queueing theory where it has a closed form
(M/M/c: :func:`mmc_p95_ms`), otherwise the same simulator held at fixed levels for long
(:func:`percentile_at`). A slow-down (``slow``: a factor on service times from one second to
another) stands for autovacuum or a GC; ``jitter_ms`` adds a shared VM's late timers to a
share of requests.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from typing import Any

from horde._engine import histogram_from_values


class QueueServer:
    """A c-server FCFS queue with a service-time draw, and the load that drives it."""

    def __init__(
        self,
        *,
        servers: int,
        service_ms: float,
        model: str,
        service: str = "exponential",
        arrivals: str = "poisson",
        think_ms: float = 0.0,
        seed: int = 1,
        jitter_ms: float = 0.0,
        jitter_share: float = 0.0,
        slow: tuple[int, int, float] | None = None,
        speed: Callable[[int], float] | None = None,
    ) -> None:
        self.servers, self.service_ms, self.model = servers, service_ms, model
        self.service, self.arrivals, self.think_ms = service, arrivals, think_ms
        self.random = random.Random(seed)
        self.jitter_ms, self.jitter_share = jitter_ms, jitter_share
        self.slow = slow
        self.speed = speed
        self.level = 0.0
        self.pace = 1.0
        self.second = 0
        self.moves: list[tuple[int, float]] = []
        self._free = [0.0] * servers  # when each server is next free (ms)
        self._vus: list[float] = []  # closed: when each VU sends next (ms)
        self._next_arrival = 0.0
        self._pending: list[tuple[float, float]] = []  # (completion, latency) not yet reported

    # -- the LevelSetter surface --------------------------------------------------------------

    def set_level(
        self,
        *,
        vus: int | None = None,
        rate_per_s: float | None = None,
        scenarios: list[str] | None = None,
        ramp_s: float = 0.0,
    ) -> dict[str, float]:
        self.level = float(vus if vus is not None else rate_per_s or 0.0)
        self.moves.append((self.second, self.level))
        return {"s0": self.level}

    def set_pace(self, factor: float, *, scenarios: list[str] | None = None) -> dict[str, float]:
        self.pace = factor
        self.moves.append((self.second, factor))
        return {"s0": factor}

    # -- the server ---------------------------------------------------------------------------

    def _service(self, now_ms: float) -> float:
        mean = self.service_ms
        if self.slow is not None and self.slow[0] <= now_ms / 1000 < self.slow[1]:
            mean *= self.slow[2]
        if self.speed is not None:
            mean *= self.speed(int(now_ms // 1000))
        return self.random.expovariate(1 / mean) if self.service == "exponential" else mean

    def _serve(self, arrival_ms: float) -> float:
        free = heapq.heappop(self._free)
        start = max(arrival_ms, free)
        done = start + self._service(start)
        heapq.heappush(self._free, done)
        latency = done - arrival_ms
        if self.jitter_share and self.random.random() < self.jitter_share:
            latency += self.random.uniform(0, self.jitter_ms)
        self._pending.append((done, latency))
        return done

    def _run_until(self, end_ms: float) -> None:
        if self.model == "open":
            rate = self.level
            if rate <= 0:
                self._next_arrival = end_ms
                return
            self._next_arrival = max(self._next_arrival, end_ms - 1000.0)
            while self._next_arrival < end_ms:
                self._serve(self._next_arrival)
                gap = 1000.0 / rate
                self._next_arrival += self.random.expovariate(1 / gap) if self.arrivals == "poisson" else gap
            return
        vus = max(0, round(self.level))
        start = end_ms - 1000.0
        while len(self._vus) < vus:
            heapq.heappush(self._vus, start + self.random.uniform(0, 1.0))
        if len(self._vus) > vus:
            self._vus = sorted(self._vus)[:vus]
            heapq.heapify(self._vus)
        while self._vus and self._vus[0] < end_ms:
            sent = heapq.heappop(self._vus)
            done = self._serve(sent)
            think = self.think_ms / self.pace if self.think_ms else 0.0
            heapq.heappush(self._vus, done + (self.random.expovariate(1 / think) if think else 0.0))

    def snapshot(self) -> dict[str, Any]:
        """The next second, as the engine's snapshot of it."""
        self.second += 1
        end = self.second * 1000.0
        self._run_until(end)
        done = [latency for finished, latency in self._pending if finished < end]
        self._pending = [(finished, latency) for finished, latency in self._pending if finished >= end]
        values = [max(1, round(latency * 1000)) for latency in done]
        count = len(values)
        return {
            "second": self.second,
            "elapsed_s": float(self.second),
            "interval_s": 1.0,
            "final": False,
            "steps": [
                {
                    "scenario": "s0",
                    "step": "get",
                    "kind": "request",
                    "requests": count,
                    "ok": count,
                    "errors": {},
                    "bytes_sent": 0,
                    "bytes_received": 0,
                    "histogram": histogram_from_values(values) if values else b"",
                }
            ],
            "iterations": count,
            "dropped_arrivals": 0,
            "cpu_percent": 10.0,
            "timer_lateness_p99_ms": 0.5,
        }


def drive(steering: Any, server: QueueServer, seconds: int, *, cpu_limit_percent: float = 180.0) -> None:
    """Runs the steering over ``seconds`` of the server, from the steering's starting level."""
    if steering.model == "pace":
        server.pace = steering.level
    else:
        server.level = steering.level
    for _ in range(seconds):
        steering.observe(server.snapshot(), server, cpu_limit_percent=cpu_limit_percent)


def percentile_at(make: Callable[[], QueueServer], level: float, percentile: float, *, seconds: int = 120) -> float:
    """The server's percentile held at ``level`` for ``seconds`` (the first 10 left out)."""
    server = make()
    server.set_level(vus=round(level)) if server.model == "closed" else server.set_level(rate_per_s=level)
    values: list[float] = []
    for _ in range(seconds):
        server.second += 1
        end = server.second * 1000.0
        server._run_until(end)
        done = [latency for finished, latency in server._pending if finished < end]
        server._pending = [(finished, latency) for finished, latency in server._pending if finished >= end]
        if server.second > 10:
            values.extend(done)
    values.sort()
    return values[min(len(values) - 1, math.ceil(percentile / 100 * len(values)) - 1)]


def mmc_p95_ms(rate_per_s: float, servers: int, mean_ms: float, percentile: float = 95.0) -> float:
    """The response-time percentile of an M/M/c queue (Erlang C; waiting ~ Exp(cμ − λ));
    infinite at or past its capacity."""
    mu, load = 1 / mean_ms, rate_per_s / 1000 * mean_ms
    if load >= servers:
        return math.inf
    below = sum(load**k / math.factorial(k) for k in range(servers))
    top = load**servers / math.factorial(servers) * servers / (servers - load)
    waiting = top / (below + top)
    drain = servers * mu - rate_per_s / 1000

    def beyond(t: float) -> float:
        if abs(drain - mu) < 1e-12:
            return (1 - waiting) * math.exp(-mu * t) + waiting * (1 + mu * t) * math.exp(-mu * t)
        return (1 - waiting) * math.exp(-mu * t) + waiting * (drain * math.exp(-mu * t) - mu * math.exp(-drain * t)) / (
            drain - mu
        )

    low, high = 0.0, 100_000.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if beyond(middle) > 1 - percentile / 100 else (low, middle)
    return low


def highest_level(holds: Callable[[float], bool], low: float, high: float, *, whole: bool = False) -> float:
    """The highest level in [low, high] for which ``holds`` is true (it is monotone)."""
    if whole:
        level = int(low)
        while level + 1 <= high and holds(level + 1):
            level += 1
        return float(level)
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low
