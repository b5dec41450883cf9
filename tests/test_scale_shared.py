"""End-to-end truth of the scalability forecast: built-in targets sharing a resource of known cost
(``--target-shared-serial-ms``, ``--target-crosstalk-ms``), measured at 1..4 instances, forecast
at 8 and 12, then measured there the same way.

The known answer is derived by hand (horde-target's ``shared`` module): 4 workers × 9.5 ms,
0.5 ms serial and 0.05 ms crosstalk give λ = 4 / 10 ms = 400 req/s per instance, σ = 0.5 / 10 =
0.05 and κ = 0.05 / 10 = 0.005, so X(n) = 400n / (1 + 0.05(n−1) + 0.005n(n−1)).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from horde.control.conductor import conduct
from horde.control.scale import builtin_instances, plan_for_instances, throughput_of
from horde.engine.target import shared_law
from horde.plan import Plan, plan_from_dict
from horde.results.scalability import fit_scalability
from horde.store import Store

WORKERS, SERVICE_MS, SERIAL_MS, CROSSTALK_MS = 4, 9.5, 0.5, 0.05
#: Twice the workers per instance: every instance stays saturated (a closed load, no think time).
VUS_PER_INSTANCE = 8
SECONDS = 3


def law(n: int) -> float:
    """The hand-derived answer: λ = 400, σ = 0.05, κ = 0.005."""
    return 400.0 * n / (1 + 0.05 * (n - 1) + 0.005 * n * (n - 1))


def one_instance_plan() -> Plan:
    return plan_from_dict(
        {
            "version": 1,
            "name": "shared-resource",
            "graceful_stop_s": 2,
            "target": {"base_url": "http://127.0.0.1:1", "request_timeout_ms": 5000},
            "scenarios": [
                {
                    "name": "s",
                    "steps": [{"name": "get", "method": "GET", "path": "/"}],
                    "workload": {
                        "type": "closed",
                        "start_vus": VUS_PER_INSTANCE,
                        "stages": [{"duration_s": SECONDS, "vus": VUS_PER_INSTANCE}],
                    },
                }
            ],
        }
    )


def measure(counts: list[int], tmp_path: Path) -> dict[int, float]:
    """Throughput at each count, on the first k of twelve instances sharing the resource (the
    others idle, so not active: they cost nothing)."""
    plan = one_instance_plan()
    measured: dict[int, float] = {}
    with (
        Store.open(f"sqlite:///{tmp_path / 'runs.sqlite'}") as store,
        builtin_instances(
            max(counts), workers=WORKERS, service_ms=SERVICE_MS, shared=(SERIAL_MS, CROSSTALK_MS)
        ) as urls,
    ):
        for k in counts:
            outcome = conduct(plan_for_instances(plan, urls, k), store)
            assert outcome.status == "finished", outcome.summary
            summary: dict[str, Any] = outcome.summary
            assert summary["errors"] == 0
            measured[k] = throughput_of(summary)[0]
    return measured


def test_the_knobs_imply_the_hand_derived_law() -> None:
    assert shared_law(WORKERS, SERVICE_MS, SERIAL_MS, CROSSTALK_MS) == (400.0, 0.05, 0.005)


def test_a_study_over_one_to_four_forecasts_eight_and_twelve(tmp_path: Path) -> None:
    measured = measure([1, 2, 3, 4, 8, 12], tmp_path)
    # The derivation, checked by measuring: each count within 3 % of the law.
    for k, throughput in measured.items():
        assert abs(throughput - law(k)) <= 0.03 * law(k), (k, throughput, law(k))
    fit = fit_scalability([(k, measured[k]) for k in (1, 2, 3, 4)])
    assert fit.refusal is None, fit.refusal
    print(f"measured {measured}; fitted on 1..4: {fit.model}")
    for k in (8, 12):
        forecast = fit.forecast(k)
        assert forecast.refusal is None and forecast.throughput is not None, forecast.refusal
        error = abs(forecast.throughput - measured[k]) / measured[k]
        print(
            f"{k} instances: forecast {forecast.throughput:.1f} ({forecast.low}–{forecast.high}), measured {measured[k]:.1f}"
        )
        assert error <= 0.10, (k, forecast.throughput, measured[k], fit.model)


def test_bad_knobs_get_a_located_message_and_exit_2(horde_cli: Any) -> None:
    without_capacity = horde_cli.run("target", "--shared-serial-ms", "1")
    assert without_capacity.returncode == 2
    assert "capacity model's slot" in without_capacity.stderr and "--workers" in without_capacity.stderr
    negative = horde_cli.run(
        "scale", "--url", "http://127.0.0.1/", "--instances", "2", "--target-workers", "1",
        "--target-service-ms", "1", "--target-crosstalk-ms", "-1", "--vus", "1", "--duration", "1s",
    )  # fmt: skip
    assert negative.returncode == 2
    assert "shared.crosstalk_ms must be at least 0" in negative.stderr and "hint:" in negative.stderr
    given_instances = horde_cli.run(
        "scale", "--url", "http://127.0.0.1/", "--instance", "http://127.0.0.1:9", "--target-shared-serial-ms", "1"
    )
    assert given_instances.returncode == 2 and "go with --instances" in given_instances.stderr
