"""Capacity answers from a measured maximum: how many users one instance supports at a given
per-user rate, and how many instances a peak needs with headroom.

The arithmetic engineers did by hand in the field reports (450,000 packets/s ÷ 43 per player
≈ 10,000 players), done once and stored with the run:

>>> question = CapacityQuestion(per_user_rate=0.13, peak_users=150_000, headroom_percent=20)
>>> block = capacity_block({"method": "find_max", "max_rps": 2_000.0}, question)
>>> block["users_supported"], block["peak_rps"], block["instances_needed"]
(15384, 19500.0, 13)

A gateway's maximum is in messages (``max_messages_per_s``: sent and received, the gateway's
packets in and out), and so is its per-user rate, as in the report:

>>> block = capacity_block({"method": "find_max", "max_rps": 900.0, "max_messages_per_s": 450_000.0},
...                        CapacityQuestion(per_user_rate=43))
>>> block["users_supported"], block["rate_unit"]
(10465, 'messages/s')

Without a scalability study ``instances_needed`` assumes instances add up linearly, and the
block says so (``instances_model``). With one, :func:`instances_from_study` answers from the
fitted scalability model instead (``results/scalability.py``): the count with its interval, and
where adding instances starts to lower throughput.

>>> capacity_block({"method": "find_max", "max_rps": 2_000.0}, question)["instances_model"]
'linear: no scalability study (`horde scale --peak-rps` fits one)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from horde.errors import InvalidInput
from horde.results.scalability import CONFIDENCE, ScalabilityFit
from horde.results.summary_blocks import CapacityBlock

#: What ``instances_needed`` rests on when no study was fitted.
LINEAR = "linear: no scalability study (`horde scale --peak-rps` fits one)"


@dataclass(frozen=True)
class CapacityQuestion:
    """What the engineer asks of the maximum: users at a per-user rate, instances for a peak."""

    per_user_rate: float | None = None
    peak_rps: float | None = None
    peak_users: float | None = None
    headroom_percent: float = 20.0

    def __post_init__(self) -> None:
        for name in ("per_user_rate", "peak_rps", "peak_users"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidInput(f"--{name.replace('_', '-')} must be above 0 (got {value:g})")
        if not 0 <= self.headroom_percent < 100:
            raise InvalidInput(
                f"--headroom must be at least 0 and under 100 % (got {self.headroom_percent:g})",
                hint="20 keeps a fifth of each instance free for bursts",
            )
        if self.peak_users is not None and self.per_user_rate is None:
            raise InvalidInput(
                "--peak-users needs --per-user-rate", hint="e.g. --peak-users 150000 --per-user-rate 0.13"
            )
        if self.peak_users is not None and self.peak_rps is not None:
            raise InvalidInput("give --peak-users or --peak-rps, not both")

    @property
    def asks_anything(self) -> bool:
        return self.per_user_rate is not None or self.peak_rps is not None

    @property
    def peak(self) -> float | None:
        """The peak as requests per second."""
        if self.peak_rps is not None:
            return self.peak_rps
        if self.peak_users is not None and self.per_user_rate is not None:
            return self.peak_users * self.per_user_rate
        return None


def capacity_block(found: CapacityBlock, question: CapacityQuestion | None) -> CapacityBlock:
    """``found`` (a steering's result, at least ``max_rps``) with the answers to ``question``."""
    block = found.copy()
    max_rps = found.get("max_rps")
    if found.get("max_messages_per_s"):
        max_rps = found["max_messages_per_s"]
        block["rate_unit"] = "messages/s"
    if question is None or not max_rps:
        return block
    if question.per_user_rate is not None:
        block["per_user_rate"] = question.per_user_rate
        block["users_supported"] = math.floor(max_rps / question.per_user_rate)
    peak = question.peak
    if peak is not None:
        usable = max_rps * (1 - question.headroom_percent / 100)
        block["peak_rps"] = round(peak, 3)  # in rate_unit when the maximum is in messages
        block["headroom_percent"] = question.headroom_percent
        block["instances_needed"] = math.ceil(peak / usable - 1e-9)
        block["instances_model"] = LINEAR
    return block


def instances_from_study(fit: ScalabilityFit, peak_rps: float, headroom_percent: float) -> dict[str, Any]:
    """Instances for ``peak_rps`` with ``headroom_percent`` from a study's fitted model: the
    count, its interval, the count past which throughput falls, and the answer as a sentence
    (or the model's refusal in its place)."""
    answer = fit.instances_for(peak_rps, headroom_percent)
    block: dict[str, Any] = {
        "peak_rps": round(peak_rps, 3),
        "headroom_percent": headroom_percent,
        "instances_needed": answer.count,
        "instances_low": answer.low,
        "instances_high": answer.high,
        # The most instances the model forecasts: where an interval's far end stops.
        "instances_limit": math.floor(fit.forecast_limit + 1e-9),
        "confidence": CONFIDENCE,
        "instances_model": "scalability model",
        "throughput_falls_past": fit.model.best_whole_n() if fit.model is not None else None,
        "refusal": answer.refusal,
    }
    block["answer"] = peak_sentence(block)
    return block


def count_interval(low: int | None, high: int | None, limit: int, confidence: float) -> str:
    """A count's interval as the answers print it after the count (instances for a peak, users
    supported): its far end past ``limit`` (the most the model forecasts) said so."""
    level = f"{confidence * 100:.0f} %"
    if low is None:
        return " (no interval: too few points)"
    if high is None:
        return f" ({low:,} to more than {limit:,} at {level})"
    return f" ({low:,}–{high:,} at {level})"


def peak_sentence(block: dict[str, Any]) -> str:
    """The answer of :func:`instances_from_study` in one sentence, as the console, the report
    and the dashboard print it.

    >>> peak_sentence({"instances_needed": 14, "instances_low": 12, "instances_high": 17, "confidence": 0.9,
    ...                "peak_rps": 19500.0, "headroom_percent": 20, "throughput_falls_past": 23, "refusal": None})
    '14 instances (12–17 at 90 %) for 19,500 req/s with 20 % headroom; past 23 instances throughput falls'
    """
    if block.get("refusal"):
        return (
            f"no instance count carries {block['peak_rps']:,.0f} req/s with {block['headroom_percent']:g} % "
            f"headroom: {block['refusal']}"
        )
    count = block["instances_needed"]
    spread = count_interval(
        block.get("instances_low"),
        block.get("instances_high"),
        block.get("instances_limit", count),
        block.get("confidence", 0.9),
    )
    sentence = (
        f"{count} instance{'s' if count != 1 else ''}{spread} for {block['peak_rps']:,.0f} req/s "
        f"with {block['headroom_percent']:g} % headroom"
    )
    falls = block.get("throughput_falls_past")
    if falls is not None:
        sentence += f"; past {falls} instance{'s' if falls != 1 else ''} throughput falls"
    else:
        sentence += "; the fitted curve has no peak (κ = 0)"
    return sentence
