"""The plan `horde profile` writes, checked against a log written from a known truth
(tests/profile_truth.py): every endpoint at 1 % of the requests or of the server's time is kept
and what is left out is told with its shares; the rate is each endpoint's own intensity in the
peak window (its requests there: an endpoint busy only at the peak weighs what it weighs there,
one busy only off it is named with a rate of 0) and the VUs are Little's law's with the mean; a plan too large for Horde's limit moves its
ids to feeder files, or is refused with the options that shrink it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from conftest import HordeCli
from horde.errors import ExitCode, InvalidInput
from horde.plan.bounds import MAX_PLAN_BYTES
from horde.plan.loader import load_plan_file
from horde.profile import PlanOptions, ProfileOptions, build_profile, write_plan
from horde.profile.kinds import find_kinds
from profile_logs import T0, Hit, combined_line, write_log
from test_profile_native import python_profile
from profile_truth import ENDPOINTS, PEAK_ENDPOINTS, ClientKind, write_kinds_log, write_truth_log


def branches(path: Path) -> dict[str, float]:
    choice = load_plan_file(path).plan.scenarios[0].steps[0]
    return {branch.steps[0].name: branch.weight for branch in choice.branches}  # type: ignore[union-attr]


def test_every_endpoint_significant_by_count_or_by_time_is_kept(tmp_path: Path) -> None:
    truth = write_truth_log(tmp_path / "access.log")
    profile = build_profile([truth.path], ProfileOptions())
    significant = {
        name for name in truth.counts if truth.share_by_count(name) >= 0.01 or truth.share_by_time(name) >= 0.01
    }
    # The truth's point: by count alone (90 %) the refunds, 55 % of the server's time, would go.
    assert truth.share_by_count("POST /api/refunds/{id}") < 0.05 and truth.share_by_time("POST /api/refunds/{id}") > 0.5
    by_count_only = write_plan(profile, tmp_path / "count.yaml", PlanOptions(min_share_percent=0))
    assert "POST /api/refunds/{id}" not in branches(by_count_only.path)

    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions())
    kept = branches(written.path)
    assert (
        set(kept)
        == significant
        == {
            "GET /api/items/{id}?page",
            "GET /api/search?q",
            "POST /api/orders",
            "POST /api/refunds/{id}",
            "GET /api/health",
            "GET /api/export/{id}",
        }
    )
    # Weighted by their requests in the peak minute (each of them has some there).
    in_peak = truth.in_minutes(truth.peak_minute(), 1)
    assert all(in_peak[name] for name in kept)
    assert kept == pytest.approx({name: 100 * in_peak[name] / sum(in_peak[n] for n in kept) for name in kept}, abs=1e-3)
    chosen = sum(truth.counts[name] for name in kept)
    left = {row["endpoint"]: row for row in written.left_out}
    assert set(left) == {"GET /api/ping", "GET /static/site.css"}
    for name, row in left.items():
        assert row["share_by_count"] == pytest.approx(truth.share_by_count(name), abs=1e-6)
        assert row["share_by_time"] == pytest.approx(truth.share_by_time(name), abs=1e-4)
    assert written.covered_share == pytest.approx(chosen / truth.requests)
    assert written.covered_time_share == pytest.approx(sum(truth.share_by_time(name) for name in kept), abs=1e-4)
    text = written.path.read_text()
    assert "# Left out: 2 endpoints, 1.40 % of the requests, 0.09 % of the time (by share: requests, time):" in text
    assert "#   GET /api/ping: 0.90 %, 0.04 %" in text
    # What the log cannot hold is told as the user's to give.
    assert "# To complete: an access log holds no request body" in text
    assert "#   POST /api/orders\n#   POST /api/refunds/{id}\n" in text
    assert any("need a body the log does not hold" in note for note in written.notes)

    # --by time keeps the heaviest first; the floor still keeps what is frequent.
    by_time = write_plan(profile, tmp_path / "time.yaml", PlanOptions(by="time", cover_percent=60))
    assert set(branches(by_time.path)) == significant


@pytest.mark.parametrize("model", ["open", "users"])
def test_sizing_is_littles_law_with_the_mean_at_the_peak_hour(tmp_path: Path, model: str) -> None:
    truth = write_truth_log(tmp_path / "access.log")
    profile = build_profile([truth.path], ProfileOptions())
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(peak="hour", headroom_percent=400, model=model))
    kept = list(branches(written.path))
    in_peak = {name: count for name, count in truth.in_minutes(truth.peak_hour_first(), 60).items() if name in kept}
    rate = sum(in_peak.values()) / 3600 * 5
    mean_ms = truth.mean_ms_of(in_peak)  # the mix the plan sends: the peak hour's
    think_ms = truth.mean_think_ms() if model == "users" else 0.0
    little = written.sizing["little"]
    assert little["rate_per_s"] == pytest.approx(rate, abs=2e-3)
    assert little["mean_ms"] == pytest.approx(mean_ms, rel=0.01)  # 1 %: the histogram's buckets
    assert little["think_ms"] == pytest.approx(think_ms, rel=0.01)
    assert little["vus"] == math.ceil(rate * (mean_ms + think_ms) / 1000)
    # Each endpoint's own intensity at the peak hour: its requests there, exactly, over 3,600 s.
    assert {row["endpoint"]: row["requests_in_window"] for row in written.sizing["endpoints"]} == in_peak
    per_endpoint = {row["endpoint"]: row["rate_per_s"] for row in written.sizing["endpoints"]}
    assert per_endpoint == pytest.approx({name: in_peak[name] / 3600 * 5 for name in kept}, abs=1e-6)
    workload = load_plan_file(written.path).plan.scenarios[0].workload
    if model == "users":
        assert workload.stages[-1].vus == little["vus"] > 1  # type: ignore[union-attr]
    else:
        assert workload.stages[-1].rate_per_s == pytest.approx(rate, abs=2e-3)  # type: ignore[union-attr]
    text = written.path.read_text()
    assert (
        f"VUs = rate × (mean time + think time) = {little['rate_per_s']:g} req/s × ({little['mean_ms']:g} ms + " in text
    )
    assert "median" not in text


def _many_endpoints_log(tmp_path: Path, endpoints: int, ids: int) -> Path:
    """``endpoints`` endpoints named in words (no id in their names), each with ``ids``
    distinct long ids in a query field."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    lines = []
    for n in range(endpoints):
        name = "-".join(words[int(digit)] for digit in f"{n:04d}")
        lines += [
            combined_line(Hit(T0 + n + i / 1000, "GET", f"/catalogue/{name}?ref={10**11 + 7919 * i}"))
            for i in range(ids)
        ]
    return write_log(tmp_path / "access.log", lines)


def test_inline_ids_past_the_plan_limit_go_to_feeder_files(tmp_path: Path) -> None:
    profile = build_profile([_many_endpoints_log(tmp_path, 400, 50)], ProfileOptions())
    # The peak hour: each endpoint has its second of the log, so a minute holds only 60 of them.
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(cover_percent=100, peak="hour"))
    assert len(written.feeders) == 400 and any("feeder files" in note for note in written.notes)
    assert written.path.stat().st_size <= MAX_PLAN_BYTES and len(branches(written.path)) == 400


def test_a_plan_over_the_limit_even_with_feeders_is_refused_naming_what_shrinks_it(tmp_path: Path) -> None:
    profile = build_profile([_many_endpoints_log(tmp_path, 3000, 1)], ProfileOptions())
    with pytest.raises(InvalidInput) as error:
        write_plan(profile, tmp_path / "plan.yaml", PlanOptions(cover_percent=100, peak="hour"))
    assert "plan size limit" in error.value.message
    for option in ("--cover", "--min-share", "--ids feeder", "--template"):
        assert option in (error.value.hint or "")
    assert not (tmp_path / "plan.yaml").exists()
    # What the hint says works: fewer endpoints.
    assert write_plan(profile, tmp_path / "plan.yaml", PlanOptions(cover_percent=10, peak="hour")).path.exists()


def test_the_truth_has_what_it_says() -> None:
    # A guard on the generator itself: its shares are the ones the tests above rely on.
    total = sum(endpoint.per_1000 * endpoint.ms for endpoint in ENDPOINTS)
    assert {
        endpoint.name
        for endpoint in ENDPOINTS
        if endpoint.per_1000 < 10 and endpoint.per_1000 * endpoint.ms / total < 0.01
    } == {"GET /api/ping", "GET /static/site.css"}


def test_client_kinds_are_recovered_as_scenarios(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    truth = write_kinds_log(log)
    options = ProfileOptions()
    profile = build_profile([log], options)
    kept = [stats.name for stats in profile.endpoints]
    found = find_kinds(profile, kept)
    assert len(found.kinds) == 3 and found.silhouette is not None and found.silhouette > 0.8
    # The most requests first: devices (2,000), users (1,200), admins (100); each group is one
    # truth kind whole, by its sessions, requests and pace.
    for kind, name in zip(found.kinds, ("devices", "users", "admins")):
        assert (kind.sessions, kind.requests) == (truth[name].sessions, truth[name].requests)
        assert kind.mean_think_ms() == pytest.approx(truth[name].think_ms, rel=1e-6)
    written = write_plan(
        profile, tmp_path / "plan.yaml", PlanOptions(model="users", min_share_percent=0, cover_percent=100), found
    )
    plan = load_plan_file(written.path).plan
    assert [scenario.name for scenario in plan.scenarios] == ["clients_1", "clients_2", "clients_3"]
    rows = written.sizing["kinds"]
    total = sum(kind.requests for kind in truth.values())
    for row, scenario, name in zip(rows, plan.scenarios, ("devices", "users", "admins")):
        assert row["share_of_requests"] == pytest.approx(truth[name].requests / total, abs=1e-6)
        assert row["vus"] == math.ceil(row["rate_per_s"] * (row["mean_ms"] + truth[name].think_ms) / 1000 - 1e-9)
        assert scenario.workload.stages[-1].vus == row["vus"]  # type: ignore[union-attr]
        assert scenario.steps[1].think_time.mean_ms == pytest.approx(truth[name].think_ms, rel=1e-3)  # type: ignore[union-attr]
    assert written.sizing["little"]["vus"] == written.sizing["users"] == sum(row["vus"] for row in rows)
    assert set(rows[0]["mix"]) == {"POST /api/telemetry"}
    # A session of 20 requests in turn over (items, items, search): 14 and 6.
    assert rows[1]["mix"] == pytest.approx({"GET /api/items/{id}": 0.7, "GET /api/search?q": 0.3}, abs=1e-6)
    assert (
        "Client kinds: 3, one scenario each, found by k-means on 90 sessions' endpoint mix and pace"
        in written.path.read_text()
    )


def test_client_kinds_are_drawn_from_the_whole_log(tmp_path: Path) -> None:
    # 2,500 devices in the log's first hour, 1,500 users only in its third: more sessions than
    # the sample holds (2,000), and a kind a reading of the log's start would never meet.
    early = ClientKind("devices", 2500, (("POST", "/api/telemetry", 5.0),), 5, 4, from_s=0, spread_s=3600)
    late = ClientKind(
        "users",
        1500,
        (("GET", "/api/items/{n}", 10.0), ("GET", "/api/search?q=s{n}", 20.0)),
        30,
        6,
        from_s=7200,
        spread_s=3600,
    )
    log = tmp_path / "access.log"
    truth = write_kinds_log(log, (early, late))
    profile = build_profile([log], ProfileOptions())
    found = find_kinds(profile, [stats.name for stats in profile.endpoints])
    assert (found.sessions, found.paced_sessions) == (2000, 4000)  # horde-logs' KIND_SAMPLE
    assert len(found.kinds) == 2 and found.silhouette is not None and found.silhouette > 0.8
    by_name = {kind.counts.most_common(1)[0][0]: kind for kind in found.kinds}
    devices, users = by_name["POST /api/telemetry"], by_name["GET /api/items/{id}"]
    # Drawn uniformly: each kind's share of the sample is its share of the log's sessions
    # (62.5 % devices; the draw's spread is under a point), and its pace is its own.
    assert devices.sessions / 2000 == pytest.approx(truth["devices"].sessions / 4000, abs=0.03)
    assert devices.sessions + users.sessions == 2000
    assert devices.mean_think_ms() == pytest.approx(truth["devices"].think_ms, rel=1e-6)
    assert users.mean_think_ms() == pytest.approx(truth["users"].think_ms, rel=1e-6)
    # The same log gives the same sample.
    assert (
        find_kinds(build_profile([log], ProfileOptions()), [stats.name for stats in profile.endpoints])
        .kinds[0]
        .sessions
        == found.kinds[0].sessions
    )


def test_one_kind_of_client_is_not_split(tmp_path: Path) -> None:
    # Every client alike (the same mix, the same pace): no split, whatever k-means makes of the noise.
    truth = write_truth_log(tmp_path / "access.log")
    options = ProfileOptions()
    profile = build_profile([truth.path], options)
    found = find_kinds(profile, [stats.name for stats in profile.endpoints])
    assert len(found.kinds) == 1 and found.kinds[0].requests == truth.requests
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(), found)
    assert [scenario.name for scenario in load_plan_file(written.path).plan.scenarios] == ["production"]
    assert "# Client kinds: one, looked for by k-means" in written.path.read_text()


def test_validate_points_at_each_body_to_supply_until_it_is_filled(horde_cli: HordeCli, tmp_path: Path) -> None:
    truth = write_truth_log(tmp_path / "access.log")
    plan = tmp_path / "plan.yaml"
    assert horde_cli.run("profile", str(truth.path), "--plan", str(plan)).returncode == 0
    checked = horde_cli.run("validate", str(plan))
    assert checked.returncode == ExitCode.INVALID_INPUT, checked.stdout + checked.stderr
    told = checked.stdout + checked.stderr
    for name in ("POST /api/orders", "POST /api/refunds/{id}"):
        line = next(
            number
            for number, text in enumerate(plan.read_text().splitlines(), start=1)
            if f"the body of {name}:" in text
        )
        assert f"{plan}:{line}" in told and f"to supply: the body of {name}: the log holds none" in told, told
    assert told.count("to supply:") == 2
    # Filled in (here with an empty JSON object), the plan is valid.
    plan.write_text(re.sub(r"body: .*supply\(.*", "body: '{}'", plan.read_text()))
    assert horde_cli.run("validate", str(plan)).returncode == 0


def test_a_chosen_window_gives_the_rate(horde_cli: HordeCli, tmp_path: Path) -> None:
    truth = write_truth_log(tmp_path / "access.log")
    profile = build_profile([truth.path], ProfileOptions())
    # The third hour: 3,000 requests in 3,600 s; a window reaching past the log's end is
    # measured over its part in the log.
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(window=(T0 + 7200, 7200), headroom_percent=0))
    kept = list(branches(written.path))
    in_window = truth.in_minutes((T0 + 7200) // 60, 60)
    assert written.sizing["peak"] == "window" and written.sizing["peak_minutes"] == 60
    assert written.sizing["peak_per_s"] == pytest.approx(3000 / 3600, abs=1e-3)
    assert written.sizing["rate_per_s"] == pytest.approx(sum(in_window[name] for name in kept) / 3600, abs=1e-3)
    assert (
        "# Rate: 0.833 req/s in the window from 2024-03-01T12:00:00Z (60 minutes of the log)"
        in written.path.read_text()
    )
    outside = horde_cli.run(
        "profile", str(truth.path), "--plan", str(tmp_path / "out.yaml"), "--window", "2024-03-02T12:00/30m"
    )
    assert outside.returncode == ExitCode.INVALID_INPUT and "holds no whole minute of the log" in outside.stderr
    assert "hint: the log runs from 2024-03-01T10:00:00Z to 2024-03-01T12:59:00Z" in outside.stderr
    assert horde_cli.run("profile", str(truth.path), "--window", "soon").returncode == ExitCode.INVALID_INPUT
    # The summary line says which window each endpoint's rate comes from.
    hour = horde_cli.run("profile", str(truth.path), "--plan", str(tmp_path / "hour.yaml"), "--peak", "hour")
    assert hour.returncode == 0, hour.stderr
    in_peak = truth.in_minutes(truth.peak_hour_first(), 60)
    share = 100 * sum(in_peak[name] for name in branches(tmp_path / "hour.yaml")) / 5000
    assert (
        f"(the peak hour's 1.389 × these endpoints' {share:.1f} % of its requests + 20 %; each endpoint's rate from its own "
        "requests in the peak hour from 2024-03-01T11:00:00Z, 60 minutes)"
    ) in " ".join(hour.stdout.split())


@pytest.mark.parametrize("reader", ["native", "python"])
def test_each_endpoint_runs_at_its_own_intensity_in_the_peak_window(tmp_path: Path, reader: str) -> None:
    """A batch that runs only in the peak hour (3 % of the log, 6 % of that hour) is sent at its
    rate there, not at its share of the day; a report read only off-peak (3 % of the log) is
    kept by the whole log's coverage, named with a rate of 0, and sends nothing at the peak."""
    truth = write_truth_log(tmp_path / "access.log", PEAK_ENDPOINTS)
    profile = (
        build_profile([truth.path], ProfileOptions())
        if reader == "native"
        else python_profile([truth.path], ProfileOptions())
    )
    batch, nightly = "POST /api/settlements/batch", "GET /api/reports/nightly"
    first = truth.peak_hour_first()
    for options, (start, minutes) in (
        (PlanOptions(peak="hour"), (first, 60)),
        (PlanOptions(), (truth.peak_minute(), 1)),
        (PlanOptions(window=(T0 + 7200, 3600)), ((T0 + 7200) // 60, 60)),
    ):
        written = write_plan(profile, tmp_path / "plan.yaml", options)
        known = truth.in_minutes(start, minutes)
        rows = {row["endpoint"]: row for row in written.sizing["endpoints"]}
        assert set(rows) == {row["endpoint"] for row in written.endpoints} and {batch, nightly} <= set(rows)
        # Exactly the window's requests per endpoint; the rate is those over the window's seconds.
        assert {name: row["requests_in_window"] for name, row in rows.items()} == {name: known[name] for name in rows}
        for name, row in rows.items():
            assert row["rate_per_s"] == pytest.approx(known[name] / (60 * minutes) * 1.2, abs=1e-6)
        kept = sum(known[name] for name in rows)
        assert written.sizing["rate_per_s"] == pytest.approx(kept / (60 * minutes) * 1.2, abs=1e-3)
        assert written.sizing["kept_share_in_window"] == pytest.approx(kept / sum(known.values()), abs=1e-6)
        sent = branches(written.path)
        assert set(sent) == {name for name in rows if known[name]}
        assert sent == pytest.approx({name: 100 * known[name] / kept for name in sent}, abs=1e-3)
        text = written.path.read_text()
        unseen = [name for name in rows if not known[name]]
        if unseen:
            assert f"# Not seen in the peak window: {len(unseen)} kept endpoint" in text
            for name in unseen:
                assert f"#   {name}: {100 * truth.share_by_count(name):.2f} % of the log's requests" in text
            assert any("had no request in" in note for note in written.notes)
        else:
            assert "Not seen in the peak window" not in text
    # The peak hour: the batch at its 300 requests / 3,600 s (twice its share of the log), the
    # nightly report at 0, not sent, named.
    written = write_plan(profile, tmp_path / "hour.yaml", PlanOptions(peak="hour", headroom_percent=0))
    rows = {row["endpoint"]: row for row in written.sizing["endpoints"]}
    assert rows[batch]["requests_in_window"] == 300 and rows[batch]["rate_per_s"] == pytest.approx(300 / 3600, abs=1e-6)
    assert rows[nightly]["requests_in_window"] == 0 and rows[nightly]["rate_per_s"] == 0
    assert branches(written.path)[batch] == pytest.approx(
        100 * 300 / sum(row["requests_in_window"] for row in rows.values()), abs=1e-3
    )
    assert nightly not in branches(written.path)
    text = written.path.read_text()
    assert "# Per endpoint: its own requests in the peak hour (2024-03-01T11:00:00Z, 60 minutes) / 3600 s × 1" in text
    assert "weighted by their requests in the peak hour (2024-03-01T11:00:00Z, 60 minutes):" in text
    assert "#   GET /api/reports/nightly: 3.00 % of the log's requests, " in text
    # The third hour, off-peak: the other way round.
    off = write_plan(profile, tmp_path / "off.yaml", PlanOptions(window=(T0 + 7200, 3600)))
    assert nightly in branches(off.path) and batch not in branches(off.path)


def test_a_window_where_no_kept_endpoint_ran_is_refused(tmp_path: Path) -> None:
    lines = [combined_line(Hit(T0 + i, "GET", "/api/items")) for i in range(600)]
    lines += [combined_line(Hit(T0 + 3600 + i, "GET", "/api/rare")) for i in range(3)]
    profile = build_profile([write_log(tmp_path / "access.log", lines)], ProfileOptions())
    with pytest.raises(InvalidInput) as error:
        write_plan(
            profile, tmp_path / "plan.yaml", PlanOptions(window=(T0 + 3600, 60), min_share_percent=0, cover_percent=90)
        )
    assert (
        "none of the 1 endpoints kept has a request in the chosen window (2024-03-01T11:00:00Z)" in error.value.message
    )
    assert "--window" in (error.value.hint or "") and not (tmp_path / "plan.yaml").exists()
