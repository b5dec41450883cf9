"""Sessions in a log: one user's requests, told apart by client address and user agent or by a
named cookie or header, closed by a gap of inactivity.

From them the profile takes requests per session, think times (the pause between one request's
end and the next one's start: the gap between their logged times less the earlier one's
duration) and the most common transitions between endpoints. Memory stays bounded: a session is
held only while it is open (a gap ends it, and past :data:`MAX_OPEN` the longest idle ones are
closed early), keyed by a hash (the address, agent or cookie itself is never kept), and
transitions are pruned to the most frequent when they grow too many.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

from horde.profile.histogram import LogHistogram
from horde.profile.logs import LogRecord, SessionKey

#: Sessions open at once beyond which the longest idle are closed (bounded memory).
MAX_OPEN = 200_000
#: Distinct transitions kept before the rarest are pruned; pruning keeps PRUNED_TO.
MAX_TRANSITIONS = 200_000
PRUNED_TO = 50_000
#: Requests per session are counted exactly up to this; longer sessions are counted here.
MAX_COUNTED_LENGTH = 10_000
#: How often (in requests) sessions idle past the gap are closed.
_SWEEP_EVERY = 1024


@dataclass(slots=True)
class _Open:
    last_s: float  # the last request's logged time
    last_ms: float  # its duration (0 when the log has none)
    endpoint: int
    requests: int


@dataclass(slots=True)
class SampledSession:
    """A session of the sample client kinds are found from: what it requested and how it paced."""

    mix: list[tuple[int, int]]  # (endpoint index, requests), in the order first requested
    think_ms_total: float
    thinks: int


class Sessions:
    """Follows sessions through a log read in (roughly) time order."""

    def __init__(self, key: SessionKey, gap_s: float) -> None:
        self.key = key
        self._by_client = key.kind == "ip-ua"
        self.gap_s = gap_s
        self.think_ms = LogHistogram()
        self.lengths: Counter[int] = Counter()
        self.transitions: Counter[tuple[int, int]] = Counter()
        self.transitions_pruned = False
        self.unkeyed = 0
        self.closed_early = 0
        # Sessions with a pause, drawn uniformly over the whole log (crate horde-logs'
        # reservoir of KIND_SAMPLE), and how many there were: the native reader draws them,
        # for client kinds; this reader, the native one's reference for the rest, draws none.
        self.sample: list[SampledSession] = []
        self.paced = 0
        self._open: OrderedDict[int, _Open] = OrderedDict()
        self._clock = float("-inf")
        self._added = 0

    def add(self, record: LogRecord, endpoint: int) -> None:
        # Called once per request: written for speed (locals, no helper calls on the usual path).
        if self._by_client:
            key = hash((record.client, record.agent))
        elif record.session is not None:
            key = hash(record.session)
        else:
            self.unkeyed += 1
            return
        now = record.time_s
        if now > self._clock:
            self._clock = now
        self._added += 1
        if not self._added % _SWEEP_EVERY:
            self._sweep()
        duration = record.duration_ms or 0.0
        session = self._open.get(key)
        if session is not None:
            gap_s = now - session.last_s
            if gap_s <= self.gap_s:
                think = gap_s * 1000.0 - session.last_ms
                self.think_ms.add(think if think > 0.0 else 0.0)
                transitions = self.transitions
                transitions[(session.endpoint, endpoint)] += 1
                if len(transitions) > MAX_TRANSITIONS:
                    self.transitions = Counter(dict(transitions.most_common(PRUNED_TO)))
                    self.transitions_pruned = True
                if gap_s > 0:
                    session.last_s = now
                session.last_ms, session.endpoint = duration, endpoint
                session.requests += 1
                self._open.move_to_end(key)
                return
            self._close(key)
        self._open[key] = _Open(now, duration, endpoint, 1)
        if len(self._open) > MAX_OPEN:
            self.closed_early += 1
            self._close(next(iter(self._open)))

    def _sweep(self) -> None:
        """Closes the sessions idle for longer than the gap (the least recent come first)."""
        horizon = self._clock - self.gap_s
        while self._open:
            key, session = next(iter(self._open.items()))
            if session.last_s >= horizon:
                break
            self._close(key)

    def _close(self, key: int) -> None:
        session = self._open.pop(key)
        self.lengths[min(session.requests, MAX_COUNTED_LENGTH)] += 1

    def finish(self) -> None:
        while self._open:
            self._close(next(iter(self._open)))

    @property
    def count(self) -> int:
        return sum(self.lengths.values())

    def length_percentile(self, percent: float) -> int:
        """Requests per session at ``percent`` (exact up to MAX_COUNTED_LENGTH)."""
        total = self.count
        if not total:
            return 0
        rank = max(1, -(-total * percent // 100))
        seen = 0
        for length in sorted(self.lengths):
            seen += self.lengths[length]
            if seen >= rank:
                return length
        return max(self.lengths)

    def mean_length(self) -> float:
        total = self.count
        return sum(length * count for length, count in self.lengths.items()) / total if total else 0.0
