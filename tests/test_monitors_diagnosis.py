"""The PostgreSQL monitor's verdicts from known samples: dead tuples outrunning autovacuum judged
on a sawtooth that stays bounded (no finding) and on real growth (a finding), the HOT share of a
run weighted by its updates, and a standby's xmin age labelled where the report gives it twice."""

from __future__ import annotations

import math

from horde.monitors import Diagnosis, monitors_block
from horde.monitors.crossings import limit_crossings
from horde.plan import PostgresMonitor
from horde.report.monitors_view import MonitorsWatch
from horde.store import MonitorSample

#: The example's settings (examples/monitored/plan.yaml): short windows for a short run.
EXAMPLE = {"dead_tuples_window_s": 10, "dead_tuples_min": 2000, "dead_tuples_growth_per_s": 20}


def _samples(rows: list[dict[str, float]]) -> list[MonitorSample]:
    """A reading a second, sample N at second N (as the sampler stores them)."""
    return [MonitorSample("pg", second, float(second), 0.0, values) for second, values in enumerate(rows, 1)]


def _table(dead: float, runs: float, written: float) -> dict[str, float]:
    return {
        "tables.public.items.dead_tuples": dead,
        "tables.public.items.autovacuum_runs": runs,
        "rows.updated_per_s": written,
        "rows.deleted_per_s": 0.0,
    }


def _sawtooth(period_s: float, seconds: int = 90) -> list[dict[str, float]]:
    """The issue's table: updates add 2,276 dead tuples between two autovacuum runs, each run
    takes them back to 6; runs every ``period_s`` (about a second), read once a second. Runs a
    little apart from the readings drift across the tooth: up for many readings in a row."""
    rate = 2276 / period_s
    rows = []
    for second in range(1, seconds + 1):
        last_run = math.floor((second - 0.3) / period_s) * period_s + 0.3
        runs = math.floor((second - 0.3) / period_s) - math.floor((second - 1.3) / period_s)
        rows.append(_table(6 + rate * (second - last_run), runs, rate))
    return rows


def _findings(rows: list[dict[str, float]], **settings: float) -> list[str]:
    monitor = PostgresMonitor(name="pg", dsn="postgresql://db/app", diagnosis={**EXAMPLE, **settings})
    diagnosis = Diagnosis([monitor])
    for sample in _samples(rows):
        diagnosis.observe(sample)
    return [finding.message for finding in diagnosis.findings if finding.rule == "dead_tuples"]


def test_a_bounded_sawtooth_of_dead_tuples_is_not_autovacuum_outrun() -> None:
    for period_s in (1.05, 0.95, 3.0, 7.0):
        rows = _sawtooth(period_s)
        dead = [row["tables.public.items.dead_tuples"] for row in rows]
        assert 6 <= min(dead) and 2000 < max(dead) <= 2282.01  # 6 to 2,282, past dead_tuples_min
        # The first and last readings of some 10 s window say +20/s and more, past 2,000.
        assert any(later > 2000 and later - earlier > 200 for earlier, later in zip(dead, dead[10:]))
        assert _findings(rows) == [], period_s
        assert _findings(rows, dead_tuples_window_s=30, dead_tuples_growth_per_s=5) == [], period_s


def test_dead_tuples_autovacuum_cannot_remove_are_autovacuum_outrun() -> None:
    # A standby's feedback holds vacuum back: a run a second, each leaving all it found.
    held = [_table(500 + 1500 * second, 1, 1500) for second in range(1, 40)]
    [message] = _findings(held)
    assert message.startswith(
        "pg: table public.items: dead tuples outrunning autovacuum from second 1: "
        "a trend of +1,500/s over 10 s to 17,000; the autovacuum run read at second 11"
    )
    assert "(10 in that time) left at least 14,000, against 2,000 at second 1" in message


def test_dead_tuples_whose_low_points_rise_between_runs_are_autovacuum_outrun() -> None:
    # A run every 3 s takes the table back to what it can remove: its low point rises 400 a second.
    rows = []
    for second in range(1, 60):
        last_run = second - second % 3
        rows.append(_table(400 * last_run + 2000 * (second - last_run), 1 if second % 3 == 0 else 0, 2000))
    [message] = _findings(rows, dead_tuples_window_s=30)
    assert "dead tuples outrunning autovacuum from second 1: a trend of +" in message
    assert "the autovacuum run read at second 30 (10 in that time) left at least 8,000" in message


def test_dead_tuples_growing_with_no_autovacuum_run_are_said_to_grow_unvacuumed() -> None:
    # Nothing takes them back down in the window (autovacuum off for the table, or its naptime
    # longer than the run): their growth is the finding, and the sentence says no run came.
    rows = [_table(3000 + 300 * second, 0, 300) for second in range(1, 40)]
    findings = _findings(rows)
    assert findings and "with no autovacuum run meanwhile" in findings[0], findings


def test_the_hot_share_of_a_run_is_its_hot_updates_over_its_updates() -> None:
    # 1,000 updates 90 % HOT, 3,000 updates 50 % HOT, a second without updates, a gap, then 500
    # updates 0 % HOT: 900 + 1,500 HOT of 4,500, 53.333 %; the mean of the three shares is 46.667 %.
    samples = [
        MonitorSample("pg", 1, 1.0, 0.0, {"hot_update_percent": 90.0, "rows.updated_per_s": 1000.0}),
        MonitorSample("pg", 2, 2.0, 0.0, {"hot_update_percent": 50.0, "rows.updated_per_s": 3000.0}),
        MonitorSample("pg", 3, 3.0, 0.0, {"rows.updated_per_s": 0.0}),
        MonitorSample("pg", 4, 4.0, 0.0, None, "cannot connect"),
        # Its rate spans the gap: 500 updates over 2 s.
        MonitorSample("pg", 5, 5.0, 0.0, {"hot_update_percent": 0.0, "rows.updated_per_s": 250.0}),
    ]
    block = monitors_block({"pg": "postgres"}, set(), {"pg": samples}, [], [])
    figure = block["sources"]["pg"]["figures"]["hot_update_percent"]
    assert figure == {"mean": 53.333, "max": 90.0, "last": 0.0}
    # The live view (a run still going) gives the same.
    watch = MonitorsWatch({"monitors": [{"name": "pg", "type": "postgres", "dsn": "postgresql://db/app"}]})
    watch.add({"pg": samples})
    view = watch.view()
    assert view is not None
    [row] = [row for row in view["figures"] if row["figure"] == "hot_update_percent"]
    assert row["mean"] == 53.333


def test_a_standby_xmin_age_is_labelled_as_the_rule_fired_and_at_the_runs_peak() -> None:
    monitor = PostgresMonitor(
        name="pg", dsn="postgresql://db/app", diagnosis={"xmin_age_limit": 10_000, "xmin_for_s": 3}
    )
    ages = [5_000, 12_000, 20_000, 36_925, 60_000, 117_589, 90_000]
    samples = _samples(
        [{"replication.s1.xmin_age": age, "dead_tuples": 1000.0 * second} for second, age in enumerate(ages, 1)]
    )
    diagnosis = Diagnosis([monitor])
    for sample in samples:
        diagnosis.observe(sample)
    [finding] = diagnosis.findings
    assert (
        "was over 10,000 transactions old from second 2 (36,925 transactions old as this rule fired, at second 4)"
    ) in finding.message
    [crossing] = limit_crossings([monitor], {"pg": samples}, [finding.to_json()])
    assert crossing.phrase == (
        "pg standby s1 holding back vacuum from second 2 (its xmin 117,589 transactions old at the run's peak)"
    )
