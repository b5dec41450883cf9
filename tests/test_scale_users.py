"""A users study: one plan's runs at several user counts (tagged scale_study=ID and users=N),
fitted by `horde scale --from-study ID --per-user-rate R`, against a built-in target whose
capacity is known; and the refusals of a study that mixes its counts or is asked the other
unit's question."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: The target's capacity model: WORKERS requests served at once, each for SERVICE_MS on average
#: (exponential service times: an M/M/c queue, whose knee is round as a real server's is).
WORKERS, SERVICE_MS = 4, 20.0
#: Each player thinks THINK_MS on average between two requests.
THINK_MS = 20.0
#: The rate each player asks, req/s: below what one player gets from an idle target.
PER_USER_RATE = 12.5
USER_COUNTS = (2, 4, 8, 16)
STUDY = "players-1"


@pytest.fixture(scope="module")
def capacity_target() -> Iterator[Any]:
    from horde.engine.target import start

    handle = start(port=0, workers=WORKERS, service_ms=SERVICE_MS, service_times="exponential")
    try:
        yield handle
    finally:
        handle.stop()


def players_plan(folder: Path, port: int) -> Path:
    plan = folder / "players.yaml"
    plan.write_text(
        f"""version: 1
name: players
target:
  base_url: http://127.0.0.1:{port}
scenarios:
  - name: play
    steps:
      - name: move
        method: GET
        path: /
        think_time: {{type: exponential, mean_ms: {THINK_MS}}}
    workload: {{type: closed, stages: [{{duration_s: 2, vus: 1}}]}}
"""
    )
    return plan


def test_a_users_study_answers_the_users_supported_at_a_per_user_rate(
    horde_cli: Any, capacity_target: Any, tmp_path: Path
) -> None:
    """The target serves at most WORKERS × 1000 / SERVICE_MS req/s; players asking R req/s each
    are all served up to that capacity / R of them. The model's interval holds that count."""
    capacity_rps = WORKERS * 1000 / SERVICE_MS
    known = capacity_rps / PER_USER_RATE
    # The known answer holds only when one player alone is served faster than R (below the knee
    # every player gets 1000 / (think + service) req/s).
    assert PER_USER_RATE < 1000 / (THINK_MS + SERVICE_MS)
    plan = players_plan(tmp_path, capacity_target.port)
    for users in USER_COUNTS:
        ran = horde_cli.run(
            "run", str(plan), "--vus", str(users), "--tag", f"scale_study={STUDY}", "--tag", f"users={users}"
        )
        assert ran.returncode == 0, ran.stderr
    out, page = tmp_path / "study.json", tmp_path / "study.html"
    result = horde_cli.run(
        "scale",
        "--from-study",
        STUDY,
        "--per-user-rate",
        f"{PER_USER_RATE:g}",
        "--summary-json",
        str(out),
        "--report",
        str(page),
    )
    assert result.returncode == 0, result.stderr
    study = json.loads(out.read_text())
    assert study["unit"] == "users" and [row["users"] for row in study["rows"]] == list(USER_COUNTS)
    forecast = study["forecast"]
    assert forecast["unit"] == "users"
    answer = forecast["users"]
    printed = " ".join(result.stdout.split())
    if forecast["refusal"] is not None:
        # A refusal is allowed only as the model's own, said in words.
        assert answer["refusal"] == forecast["refusal"] and f"no forecast: {forecast['refusal']}" in printed
        return
    if answer["users_at_least"]:
        # Served as far as the model reaches (a short, noisy study reaches little past its
        # largest count): the lower bound must be true, and said.
        assert known >= answer["users_supported"], (known, answer, study["rows"])
        assert answer["answer"].startswith(f"at least {answer['users_supported']} users supported at 12.5")
        assert answer["answer"] in printed, printed
        return
    assert answer["refusal"] is None, answer
    high = answer["users_high"] if answer["users_high"] is not None else float("inf")
    assert answer["users_low"] <= known <= high, (known, answer, study["rows"])
    assert answer["answer"].startswith(f"{answer['users_supported']} users supported (")
    assert answer["answer"].endswith("at 12.5 req/s each")
    # The unit's words everywhere the study is shown: the console, the report and its chart.
    assert answer["answer"] in printed and "per user" in result.stdout and "instances" not in result.stdout
    if forecast["peak_n"] is not None:
        assert f"throughput peaks at {forecast['peak_n']:.1f} users" in printed
    html = page.read_text()
    assert answer["answer"] in html and "Throughput by user count" in html and "<th>users</th>" in html
    from horde.report.study_view import scalability_chart

    chart = scalability_chart(forecast)
    assert chart["layout"]["xaxis"]["title"]["text"] == "users"
    assert any(trace["name"] == "12.5 req/s per user" for trace in chart["data"])


def stored_runs(store_path: Path, tagged: list[dict[str, str]], throughputs: list[float] | None = None) -> None:
    """Runs written to the store with these tags (and a throughput each), no load sent."""
    from horde.store import Store

    with Store.open(f"sqlite:///{store_path}") as store:
        for index, tags in enumerate(tagged):
            run_id = store.create_run(plan={}, plan_name="study", parameters={}, tags=tags)
            throughput = throughputs[index] if throughputs else 100.0 * (index + 1)
            store.finish_run(
                run_id, status="finished", summary={"capacity": {"method": "find_max", "max_rps": throughput}}
            )


@pytest.mark.hand_made_summaries
def test_the_dashboard_answers_a_users_study_at_its_tagged_rate(horde_cli: Any) -> None:
    """The dashboard's panel beside a run of a users study: the users supported at the rate its
    runs are tagged with, against the law solved by hand for a curve of known λ, σ and κ."""
    from horde.report.study_view import PER_USER_RATE_TAG, study_panel
    from horde.store import Store

    lam, sigma, kappa, rate = 50.0, 0.02, 0.0005, 20.0
    counts = (10, 20, 40, 80)
    tags = [{"scale_study": "gateway", "users": str(n), PER_USER_RATE_TAG: f"{rate:g}"} for n in counts]
    stored_runs(horde_cli.store_path, tags, [lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)) for n in counts])
    # X(N)/N = rate where κN² + (σ − κ)N − (λ/rate − 1 + σ) = 0: its root, rounded down.
    known = math.floor(
        (-(sigma - kappa) + math.sqrt((sigma - kappa) ** 2 + 4 * kappa * (lam / rate - 1 + sigma))) / (2 * kappa)
    )
    with Store.open(horde_cli.store_url) as store:
        panel, chart = study_panel(store, tags[0])
    assert panel["answer"].startswith(f"{known} users supported (") and panel["answer"].endswith("at 20 req/s each")
    assert [run["count"] for run in panel["runs"]] == list(counts)
    assert chart["layout"]["xaxis"]["title"]["text"] == "users"


@pytest.mark.hand_made_summaries
def test_a_study_that_mixes_instances_and_users_is_refused(horde_cli: Any) -> None:
    stored_runs(
        horde_cli.store_path,
        [{"scale_study": "mixed", "instances": "1"}, {"scale_study": "mixed", "users": "10"}],
    )
    result = horde_cli.run("scale", "--from-study", "mixed")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "study mixed mixes instance counts (runs " in message and "and user counts (runs " in message
    assert "--tag scale_study=" in message  # the hint: a study id of their own
    stored_runs(horde_cli.store_path, [{"scale_study": "both", "instances": "2", "users": "20"}])
    both = horde_cli.run("scale", "--from-study", "both")
    assert both.returncode == 2 and "is tagged instances='2' and users='20'" in " ".join(both.stderr.split())


@pytest.mark.hand_made_summaries
def test_each_study_is_asked_its_own_question(horde_cli: Any) -> None:
    stored_runs(horde_cli.store_path, [{"scale_study": "hosts", "instances": str(k)} for k in (1, 2, 3)])
    stored_runs(horde_cli.store_path, [{"scale_study": "players", "users": str(n)} for n in (10, 20, 40)])
    rate = horde_cli.run("scale", "--from-study", "hosts", "--per-user-rate", "2.5")
    message = " ".join(rate.stderr.split())
    assert rate.returncode == 2 and "study hosts counts instances" in message and "--peak-rps" in message
    peak = horde_cli.run("scale", "--from-study", "players", "--peak-rps", "5000")
    message = " ".join(peak.stderr.split())
    assert peak.returncode == 2 and "study players counts users" in message and "--per-user-rate" in message
    zero = horde_cli.run("scale", "--from-study", "players", "--per-user-rate", "0")
    assert zero.returncode == 2 and "--per-user-rate must be a number of requests/s above 0" in zero.stderr
    new = horde_cli.run("scale", "--url", "http://127.0.0.1:9/", "--instances", "2", "--per-user-rate", "2.5")
    assert new.returncode == 2 and "--per-user-rate answers a users study" in " ".join(new.stderr.split())
