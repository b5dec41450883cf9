"""Client kinds: sessions grouped by what they do, for a plan with one scenario per kind.

A session's features are its endpoint mix (the share of its requests each endpoint has, the
endpoints the plan keeps as dimensions, the rest together as one) and its pace (its mean think
time, as log10(1 + seconds) over the largest such value: a device writing every second and a
user reading every minute are far apart, two users at 20 and 25 s are not). Groups are found by
k-means (Lloyd's iterations from a k-means++ start drawn with a fixed seed: the same log gives
the same groups) for k = 2 to :data:`MAX_KINDS`; the k kept is the one whose groups separate
best by their mean silhouette (for each session, how much nearer it is to its own group than to
the next: 1 apart, 0 on the border), among the splits whose centres are all at least
:data:`MIN_CENTRE_DISTANCE` apart, and only when that is at least :data:`MIN_SILHOUETTE`;
otherwise the log has one kind of client. The silhouette is told with the groups.

The sessions are the profile's own sample (:attr:`Sessions.sample`: up to 2,000 sessions with
a pause, drawn uniformly over the whole log as the native reader read it, with their endpoint
mix and pace): the kinds of the whole day, not of its first hour, bounded whatever the log's
size. Sessions are told apart and closed by gap as the profile's are; sessions of one request
have no pace and are not drawn.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from horde.profile.profile import OTHER, Profile

#: Sessions the silhouette is measured on (every n-th of those grouped).
SILHOUETTE_SESSIONS = 400
MAX_KINDS = 4
#: The mean silhouette a split must reach to be told as kinds of client.
MIN_SILHOUETTE = 0.5
#: How far apart (in the features' units: a share of the requests, a share of the pace's
#: range) every two groups' centres must be: sessions of one kind differ by chance, and
#: k-means splits even noise cleanly enough for the silhouette to pass.
MIN_CENTRE_DISTANCE = 0.2
KMEANS_ROUNDS = 50


@dataclass
class Kind:
    """One kind of client: its sessions, their requests by endpoint, their mean think time and
    requests per session."""

    sessions: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    think_ms_total: float = 0.0
    thinks: int = 0

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    def mean_think_ms(self) -> float:
        return self.think_ms_total / self.thinks if self.thinks else 0.0

    def mean_length(self) -> float:
        return self.requests / self.sessions if self.sessions else 0.0


@dataclass
class Kinds:
    """The kinds found (the most requests first), how well they separate, and from what."""

    kinds: list[Kind]
    silhouette: float | None  # of the split told, or the best split refused (None: none tried)
    sessions: int  # sessions grouped (the profile's sample)
    paced_sessions: int  # the log's sessions with a pause, the sample drawn from them


@dataclass
class _Session:
    counts: Counter[str]
    think_ms_total: float
    thinks: int


def find_kinds(profile: Profile, kept: Sequence[str]) -> Kinds:
    """The kinds of client in the profile's sample of sessions, their mixes over ``kept``
    endpoint names (the rest together, as the profile's :data:`~horde.profile.profile.OTHER`)."""
    names = profile.endpoint_names()
    grouped = []
    for sampled in profile.sessions.sample:
        counts: Counter[str] = Counter()
        for index, count in sampled.mix:
            counts[names.get(index, OTHER)] += count
        grouped.append(_Session(counts, sampled.think_ms_total, sampled.thinks))
    paced = profile.sessions.paced
    if len(grouped) < 2 * MAX_KINDS:
        return Kinds([_kind(grouped)], None, len(grouped), paced)
    points = _features(grouped, kept)
    best: tuple[float, list[int]] | None = None
    for k in range(2, MAX_KINDS + 1):
        labels = _kmeans(points, k)
        if _closest_centres(points, labels) < MIN_CENTRE_DISTANCE:
            continue  # a split of one kind's noise, however clean its silhouette
        score = _silhouette(points, labels)
        if best is None or score > best[0] + 1e-9:
            best = (score, labels)
    if best is None or best[0] < MIN_SILHOUETTE:
        return Kinds([_kind(grouped)], best[0] if best else None, len(grouped), paced)
    score, labels = best
    groups: dict[int, list[_Session]] = {}
    for session, label in zip(grouped, labels):
        groups.setdefault(label, []).append(session)
    kinds = sorted((_kind(members) for members in groups.values()), key=lambda kind: -kind.requests)
    return Kinds(kinds, score, len(grouped), paced)


def _kind(sessions: Sequence[_Session]) -> Kind:
    kind = Kind()
    for session in sessions:
        kind.sessions += 1
        kind.counts.update(session.counts)
        kind.think_ms_total += session.think_ms_total
        kind.thinks += session.thinks
    return kind


def _features(sessions: Sequence[_Session], kept: Sequence[str]) -> list[list[float]]:
    names = set(kept)
    paces = [math.log10(1.0 + session.think_ms_total / session.thinks / 1000.0) for session in sessions]
    top = max(paces) or 1.0
    points = []
    for session, pace in zip(sessions, paces):
        total = sum(session.counts.values())
        rest = sum(count for name, count in session.counts.items() if name not in names)
        points.append([session.counts.get(name, 0) / total for name in kept] + [rest / total, pace / top])
    return points


def _distance2(a: Sequence[float], b: Sequence[float]) -> float:
    return sum((x - y) * (x - y) for x, y in zip(a, b))


def _kmeans(points: list[list[float]], k: int) -> list[int]:
    """Lloyd's iterations from a k-means++ start (seed 0)."""
    rng = random.Random(0)
    centres = [points[rng.randrange(len(points))]]
    while len(centres) < k:
        weights = [min(_distance2(point, centre) for centre in centres) for point in points]
        total = sum(weights)
        if total == 0:
            break
        draw, index = rng.random() * total, 0
        while draw > weights[index] and index < len(points) - 1:
            draw -= weights[index]
            index += 1
        centres.append(points[index])
    labels = [0] * len(points)
    for _ in range(KMEANS_ROUNDS):
        moved = [min(range(len(centres)), key=lambda c: _distance2(point, centres[c])) for point in points]
        if moved == labels and _ > 0:
            break
        labels = moved
        for c in range(len(centres)):
            members = [point for point, label in zip(points, labels) if label == c]
            if members:
                centres[c] = [sum(column) / len(members) for column in zip(*members)]
    return labels


def _closest_centres(points: list[list[float]], labels: list[int]) -> float:
    centres = []
    for label in set(labels):
        members = [point for point, of in zip(points, labels) if of == label]
        centres.append([sum(column) / len(members) for column in zip(*members)])
    return min(math.sqrt(_distance2(a, b)) for i, a in enumerate(centres) for b in centres[i + 1 :])


def _silhouette(points: list[list[float]], labels: list[int]) -> float:
    """The mean silhouette over every n-th point (:data:`SILHOUETTE_SESSIONS` of them)."""
    every = max(1, math.ceil(len(points) / SILHOUETTE_SESSIONS))
    chosen = list(range(0, len(points), every))
    clusters = set(labels[i] for i in chosen)
    if len(clusters) < 2:
        return 0.0
    scores = []
    for i in chosen:
        sums: dict[int, list[float]] = {}
        for j in chosen:
            if j != i:
                sums.setdefault(labels[j], []).append(math.sqrt(_distance2(points[i], points[j])))
        own = sums.get(labels[i])
        if not own:
            scores.append(0.0)
            continue
        a = sum(own) / len(own)
        b = min(sum(values) / len(values) for label, values in sums.items() if label != labels[i])
        scores.append((b - a) / max(a, b) if max(a, b) > 0 else 0.0)
    return sum(scores) / len(scores)
