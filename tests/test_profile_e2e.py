"""`horde profile` end to end: a production log in, a plan out that validates, runs against the
built-in target, and sends the log's mix (measured by Horde's own per-step counts) within a few
percent. A few seconds of load on loopback."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from conftest import HordeCli
from profile_logs import T0, Hit, combined_line, write_log

#: The log's mix, over paths the built-in target serves.
MIX = {"GET /": 0.4, "GET /bytes/{id}": 0.3, "GET /delay/{id}": 0.2, "GET /status/{id}?token": 0.1}


def production_log(tmp_path: Path) -> Path:
    """A busy minute of 12,000 requests (200/s) after a quiet one of 600, in MIX's shares."""
    rng = random.Random(7)
    lines = []
    for t, count in ((T0, 600), (T0 + 60, 12_000)):
        for i in range(count):
            draw = rng.random()
            if draw < 0.4:
                target = "/"
            elif draw < 0.7:
                target = f"/bytes/{rng.choice([16, 64, 256])}"
            elif draw < 0.9:
                target = f"/delay/{rng.choice([1, 2])}"
            else:
                target = f"/status/200?token=tok{rng.randrange(10**6)}"
            lines.append(combined_line(Hit(t + 60 * i / count, "GET", target, seconds=rng.uniform(0.001, 0.004),
                                           client=f"10.1.0.{rng.randrange(50)}")))
    return write_log(tmp_path / "access.log", lines)


def test_the_plan_written_reproduces_the_logs_mix(horde_cli: HordeCli, builtin_target: Any, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    profile_json = tmp_path / "profile.json"
    result = horde_cli.run("profile", str(production_log(tmp_path)), "--plan", str(plan), "--json", str(profile_json),
                           "--cover", "100", "--headroom", "400", "--duration", "3s", "--ramp-up", "0",
                           "--base-url", f"http://127.0.0.1:{builtin_target.port}")
    assert result.returncode == 0, result.stderr
    profile = json.loads(profile_json.read_text())
    log_shares = {row["endpoint"]: row["share_by_count"] for row in profile["endpoints"]}
    assert log_shares == pytest.approx(MIX, abs=0.02)
    assert profile["plan"]["sizing"]["rate_per_s"] == 1000.0  # the busy minute's 200/s plus 400 %

    validated = horde_cli.run("validate", str(plan))
    assert validated.returncode == 0, validated.stderr

    summary_path = tmp_path / "summary.json"
    ran = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", str(summary_path), timeout=90)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    summary = json.loads(summary_path.read_text())
    counts = {name: figures["requests"] for name, figures in summary["steps"].items()}
    total = sum(counts.values())
    assert set(counts) == set(MIX) and total > 2000, counts
    assert summary["errors"] == 0, summary["errors_by_kind"]
    for name, share in log_shares.items():
        # About 3,000 draws: a share's standard deviation is under 0.9 points; 3 points is over 3 of them.
        assert abs(counts[name] / total - share) < 0.03, (name, counts[name] / total, share)

