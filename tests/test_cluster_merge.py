"""The merge of several generators' snapshots of one second is exact: counters are sums, and the
merged latency distribution is that of all the samples together (HDR buckets merged, never
percentiles averaged). Checked with known samples, no cluster needed."""

from __future__ import annotations

import random
from typing import Any

from horde._engine import histogram_from_values, histogram_stats
from horde.cluster.merge import generator_row
from horde.engine.snapshot import merge_seconds

PERCENTILES = [50.0, 90.0, 95.0, 99.0, 99.9, 100.0]


def part(
    second: int, samples_us: list[int], *, errors: dict[str, int], cpu: float, lateness: float, vus: int
) -> dict[str, Any]:
    return {
        "second": second,
        "elapsed_s": float(second),
        "interval_s": 1.0,
        "timestamp": 1_000.0 + second,
        "final": False,
        "steps": [
            {
                "scenario": "s",
                "step": "get",
                "kind": "request",
                "requests": len(samples_us) + sum(errors.values()),
                "ok": len(samples_us),
                "errors": errors,
                "bytes_sent": 100 * len(samples_us),
                "bytes_received": 50 * len(samples_us),
                "histogram": bytes(histogram_from_values(samples_us)),
            }
        ],
        "active_vus": vus,
        "peak_vus": vus,
        "busy_vus": vus // 2,
        "iterations": len(samples_us),
        "dropped_arrivals": 1,
        "connections_opened": 2,
        "target_vus": 30,
        "target_rate_per_s": None,
        "cpu_percent": cpu,
        "timer_lateness_p99_ms": lateness,
    }


def test_merged_percentiles_are_those_of_all_samples_together() -> None:
    rng = random.Random(7)
    # Three generators with different latency: one fast, one slow, one with a long tail.
    samples = [
        [rng.randint(800, 1_200) for _ in range(5_000)],
        [rng.randint(5_000, 9_000) for _ in range(3_000)],
        [int(rng.expovariate(1 / 2_000)) + 100 for _ in range(4_000)],
    ]
    parts = [
        part(3, values, errors={"timeout": index}, cpu=30.0 + 10 * index, lateness=0.5 * index, vus=10)
        for index, values in enumerate(samples)
    ]
    merged = merge_seconds(parts, final=False)
    step = merged["steps"][0]
    together = [value for values in samples for value in values]
    expected = histogram_stats(histogram_from_values(together), PERCENTILES)
    got = histogram_stats(step["histogram"], PERCENTILES)
    assert got == expected, "the merged histogram is the histogram of the concatenated samples"
    assert got["count"] == 12_000
    # Averaging the three p99s (what some tools do) would be far off: the merge is not that.
    averaged_p99 = sum(histogram_stats(histogram_from_values(v), [99.0])["percentiles_us"][0] for v in samples) / 3
    assert abs(averaged_p99 - got["percentiles_us"][3]) > 1_000
    assert step["requests"] == 12_003 and step["ok"] == 12_000 and step["errors"] == {"timeout": 3}
    assert step["bytes_sent"] == 1_200_000
    assert merged["active_vus"] == 30 and merged["dropped_arrivals"] == 3 and merged["connections_opened"] == 6
    assert merged["target_vus"] == 30, "the plan's level, not three times it"
    assert merged["cpu_percent"] == 50.0 and merged["timer_lateness_p99_ms"] == 1.0, "the sickest generator's"


def test_steps_seen_by_some_generators_only_are_kept() -> None:
    first = part(1, [1_000], errors={}, cpu=1, lateness=0, vus=1)
    second = part(1, [2_000], errors={}, cpu=1, lateness=0, vus=1)
    second["steps"][0]["step"] = "other"
    merged = merge_seconds([first, second], final=True)
    assert [(step["step"], step["requests"]) for step in merged["steps"]] == [("get", 1), ("other", 1)]
    assert merged["final"] is True


def test_a_generator_row() -> None:
    row = generator_row(
        2, "10.0.0.3", "running", part(1, [1_000, 2_000], errors={"status_5xx": 1}, cpu=12.5, lateness=0.3, vus=4)
    )
    assert row == {
        "generator": 2,
        "node": "10.0.0.3",
        "state": "running",
        "requests": 3,
        "rps": 3.0,
        "cpu_percent": 12.5,
        "timer_lateness_p99_ms": 0.3,
        "active_vus": 4,
    }
    assert generator_row(1, "10.0.0.2", "lost", None)["requests"] == 0
