"""`horde profile`: endpoint templates, the profile's figures on logs with known answers
(shares by count and by time, percentiles, rates and peaks, sessions), the plan it writes, the
page, secrets kept out of everything written, and every bad flag refused with exit code 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import HordeCli
from horde.cli.app import main
from horde.errors import ExitCode, InvalidInput
from horde.plan.loader import load_plan_file
from horde.profile import (
    PlanOptions,
    ProfileOptions,
    SessionKey,
    Templater,
    build_profile,
    classify,
    render_page,
    write_plan,
)
from horde.profile.histogram import LogHistogram
from horde.profile.logs import LogRecord
from horde.profile.profile import ProfileBuilder
from horde.profile.sessions import Sessions
from profile_logs import T0, Hit, combined_line, write_log


# -- endpoint templates -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "name", "values"),
    [
        ("/users/42/orders", "GET /users/{id}/orders", ("42",)),
        ("/files/3f9a0c7be12d/raw", "GET /files/{id}/raw", ("3f9a0c7be12d",)),
        ("/o/123e4567-e89b-12d3-a456-426614174000", "GET /o/{id}", ("123e4567-e89b-12d3-a456-426614174000",)),
        ("/items/17.json", "GET /items/{id}.json", ("17",)),
        ("/static/app.3f9a0c7be1.js", "GET /static/app.{id}.js", ("3f9a0c7be1",)),
        ("/v/1.20.3/x", "GET /v/{id}.{id}.{id}/x", ("1", "20", "3")),
        ("/about/team", "GET /about/team", ()),
        ("/search?q=shoes&page=2&q=boots", "GET /search?q&page", ("shoes", "2")),
        ("/u/bob@example.org/feed", "GET /u/{email}/feed", (None,)),
        ("/dl/AbC123dEf456GhI789jKl0", "GET /dl/{token}", (None,)),
        # After a segment named like a secret: a placeholder whatever its length or shape, never kept.
        ("/reset-token/12345", "GET /reset-token/{secret}", (None,)),
        ("/reset-token/abQ12", "GET /reset-token/{secret}", (None,)),
        ("/api/key/ABCDEFGHIJKLMNOP", "GET /api/key/{secret}", (None,)),
        ("/session/x.y/end", "GET /session/{secret}/end", (None,)),
        ("/reset-token/abcdef", "GET /reset-token/{secret}", (None,)),
        ("/auth/login", "GET /auth/{secret}", (None,)),  # wide on purpose (--template keeps it apart)
        ("/oauth/token", "GET /oauth/token", ()),  # a credential's name, not one
        ("/auth/api-key/Zz9", "GET /auth/api-key/{secret}", (None,)),
        # Letters only, in a random-looking mix: a token; written words stay text.
        ("/dl/qZkTwRbXmPvLsNdH", "GET /dl/{token}", (None,)),
        ("/dl/XMLHttpRequestHandler", "GET /dl/XMLHttpRequestHandler", ()),
        ("/x?access_token=abc&sig=zz&page=1", "GET /x?access_token&sig&page", (None, None, "1")),
        ("/x?contact=bob%40example.org", "GET /x?contact", (None,)),
    ],
)
def test_templates(target: str, name: str, values: tuple[str | None, ...]) -> None:
    shape, found = Templater().template("GET", target)
    assert (shape.name, found) == (name, values)


def test_same_endpoint_same_shape_object() -> None:
    templater = Templater()
    assert templater.template("GET", "/a/1")[0] is templater.template("GET", "/a/2")[0]
    assert templater.template("GET", "/a/1")[0] is not templater.template("POST", "/a/1")[0]


def test_paths_of_one_skeleton_keep_their_own_literal_segments() -> None:
    # /api/v2/items/5 and /api/v3/items/66 are both /api/v0/items/0 with their digits zeroed.
    templater = Templater()
    assert templater.template("GET", "/api/v2/items/5") == (templater.template("GET", "/api/v2/items/5")[0], ("5",))
    shape, values = templater.template("GET", "/api/v3/items/6")
    assert (shape.name, values) == ("GET /api/v3/items/{id}", ("6",))
    assert templater.template("GET", "/api/v3/items/7")[1] == ("7",)
    assert templater.template("GET", "/p/v2.123")[0].name == "GET /p/v2.{id}"
    assert templater.template("GET", "/p/v3.456")[0].name == "GET /p/v3.{id}"


segment = st.one_of(
    st.integers(0, 10**6).map(str),
    st.sampled_from(
        ["v2", "v3", "api", "items", "app.17.js", "a1b2c3d4e5", "3f9a0c7be1", "token", "x@y.io", "17.json", "v1.2"]
    ),
    st.text(alphabet="ab12.-_", min_size=1, max_size=10),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(segment, min_size=1, max_size=5), min_size=1, max_size=20))
def test_remembered_templates_are_the_ones_made_afresh(paths: list[list[str]]) -> None:
    templater = Templater()
    for parts in paths:
        target = "/" + "/".join(parts)
        assert templater.template("GET", target) == Templater().template("GET", target), target


def test_given_templates_come_first() -> None:
    templater = Templater(["/blog/{slug}", "POST /users/{name}/avatar", "/reset-token/{t}", "/a/{token}"])
    assert templater.template("GET", "/reset-token/abQ12") == (templater.template("GET", "/reset-token/x")[0], (None,))
    assert templater.template("GET", "/a/abc")[1] == (None,)
    assert Templater(["/auth/login"]).template("POST", "/auth/login")[0].name == "POST /auth/login"
    assert templater.template("GET", "/blog/summer-sale")[0].name == "GET /blog/{slug}"
    assert templater.template("POST", "/users/ann/avatar")[0].name == "POST /users/{name}/avatar"
    assert templater.template("GET", "/users/ann/avatar")[0].name == "GET /users/ann/avatar"  # its method only
    with pytest.raises(InvalidInput):
        Templater(["users/{x}"])
    with pytest.raises(InvalidInput):
        Templater(["/users/{1x}"])


def test_classify() -> None:
    assert [classify(s) for s in ("7", "v2", "abcdef12", "facade", "2024-03-01")] == ["int", None, "hex", None, None]


def test_log_histogram_is_within_one_percent() -> None:
    histogram = LogHistogram()
    values = [0.0] * 10 + [float(v) for v in range(1, 10_001)]
    for value in values:
        histogram.add(value)
    exact = sorted(values)
    for percent in (50, 90, 95, 99):
        truth = exact[int(len(exact) * percent / 100) - 1]
        assert histogram.percentile(percent) == pytest.approx(truth, rel=0.011)
    assert histogram.percentile(0.01) == 0.0 and histogram.mean() == pytest.approx(sum(values) / len(values))
    other = LogHistogram()
    other.add(20_000.0)
    histogram.merge(other)
    assert histogram.count == len(values) + 1 and histogram.percentile(100) == 20_000.0


# -- the profile --------------------------------------------------------------------------------


def known_log(tmp_path: Path) -> Path:
    """Minute 0: 120 requests, minute 1: 60, minute 2: none, minute 3: 30 (span 4 minutes).
    Of the 210: 138 GET /items/{id} at 10 ms, 51 POST /orders at 100 ms (5 of them 500),
    21 GET /search?q at 5 ms."""
    times = (
        [T0 + i * 0.5 for i in range(120)] + [T0 + 60 + i for i in range(60)] + [T0 + 180 + 2 * i for i in range(30)]
    )
    lines = []
    for i, t in enumerate(times):
        if i % 10 < 2 or (i % 10 == 2 and i < 90):
            hit = Hit(t, "POST", "/orders", status=500 if i % 10 == 0 and i < 50 else 201, seconds=0.1)
        elif i % 10 == 3:
            hit = Hit(t, "GET", f"/search?q=term{i % 4}", seconds=0.005)
        else:
            hit = Hit(t, "GET", f"/items/{i % 7}", seconds=0.01)
        lines.append(combined_line(hit))
    return write_log(tmp_path / "access.log", lines)


def test_profile_figures(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    data = profile.to_dict()
    rows = {row["endpoint"]: row for row in data["endpoints"]}
    assert {name: row["requests"] for name, row in rows.items()} == {
        "GET /items/{id}": 138,
        "POST /orders": 51,
        "GET /search?q": 21,
    }
    assert list(rows) == ["GET /items/{id}", "POST /orders", "GET /search?q"]  # most requests first
    total_ms = 138 * 10 + 51 * 100 + 21 * 5
    assert rows["POST /orders"]["share_by_count"] == pytest.approx(51 / 210, abs=1e-6)
    assert rows["POST /orders"]["share_by_time"] == pytest.approx(5100 / total_ms, abs=1e-6)
    assert rows["POST /orders"]["total_time_s"] == pytest.approx(5.1)
    assert rows["GET /items/{id}"]["p50_ms"] == pytest.approx(10, rel=0.01)
    assert rows["POST /orders"]["p95_ms"] == pytest.approx(100, rel=0.01)
    assert rows["POST /orders"]["statuses"] == {"201": 46, "500": 5}
    assert rows["POST /orders"]["error_percent"] == pytest.approx(100 * 5 / 51, abs=1e-3)
    rate = data["rate"]
    assert data["source"]["span_minutes"] == 4 and rate["mean_per_s"] == pytest.approx(210 / 240, abs=1e-3)
    assert rate["peak_minute"] == {"at": "2024-03-01T10:00:00Z", "requests": 120, "per_s": 2.0}
    assert rate["peak_hour"]["requests"] == 210
    assert rate["peak_to_mean"] == pytest.approx(2.0 / (210 / 240), abs=1e-3)
    assert [count for _, count in rate["per_minute"]] == [120, 60, 30]
    assert data["overall"]["total_time_s"] == pytest.approx(total_ms / 1000)


def test_sessions_think_times_and_transitions() -> None:
    sessions = Sessions(SessionKey("ip-ua"), gap_s=1800)

    def hit(t: float, client: str, endpoint: int, seconds: float = 0.5) -> None:
        sessions.add(LogRecord(t, "GET", "/", 200, seconds * 1000, client, "ua", None), endpoint)

    hit(T0, "a", 0)
    hit(T0 + 1, "b", 1)
    hit(T0 + 2, "a", 1)
    hit(T0 + 4, "a", 0)
    hit(T0 + 1 + 3600, "b", 1)  # an hour later: a new session
    sessions.finish()
    assert sessions.count == 3 and dict(sessions.lengths) == {3: 1, 1: 2}
    assert sessions.mean_length() == pytest.approx(5 / 3) and sessions.length_percentile(95) == 3
    assert sessions.think_ms.count == 2 and sessions.think_ms.mean() == pytest.approx(1500.0)
    assert dict(sessions.transitions) == {(0, 1): 1, (1, 0): 1}


def test_sessions_by_cookie_count_requests_without_one(tmp_path: Path) -> None:
    lines = [
        combined_line(Hit(T0 + i, "GET", "/", client=f"10.0.0.{i}", cookie=f"sid=user{i % 2}" if i < 8 else None))
        for i in range(10)
    ]
    profile = build_profile([write_log(tmp_path / "a.log", lines)], ProfileOptions(session=SessionKey("cookie", "sid")))
    data = profile.to_dict()["sessions"]
    assert data["sessions"] == 2 and data["requests_without_key"] == 2
    assert data["requests_per_session"]["mean"] == 4.0 and data["key"] == "cookie:sid"


def test_endpoints_past_the_limit_are_counted_together(tmp_path: Path) -> None:
    lines = [combined_line(Hit(T0, "GET", f"/page-{chr(97 + i)}")) for i in range(8)]
    profile = build_profile([write_log(tmp_path / "a.log", lines)], ProfileOptions(max_endpoints=5))
    data = profile.to_dict()
    assert len(profile.endpoints) == 5 and data["endpoints"][-1] == {
        **data["endpoints"][-1],
        "endpoint": "(other endpoints)",
        "requests": 3,
    }


def test_ever_new_paths_do_not_grow_the_memory() -> None:
    builder = ProfileBuilder(ProfileOptions(max_endpoints=50))
    for i in range(2000):
        builder.add(
            LogRecord(
                T0 + i,
                "GET",
                f"/page-{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}",
                200,
                1.0,
                "c",
                "a",
                None,
            )
        )
    assert len(builder.endpoints) == 50 and len(builder.templater._shapes) == 50
    assert builder.other is not None and builder.other.count == 2000 - 50 * (2000 // 2000)


def test_an_empty_log_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as error:
        build_profile([write_log(tmp_path / "a.log", [""])], ProfileOptions())
    assert "no request" in error.value.message


# -- the plan ---------------------------------------------------------------------------------


def plan_dict(path: Path) -> dict[str, object]:
    return load_plan_file(path).plan.model_dump(mode="json", by_alias=True)


def branches_of(path: Path) -> dict[str, float]:
    plan = load_plan_file(path).plan
    choice = plan.scenarios[0].steps[0]
    return {branch.steps[0].name: branch.weight for branch in choice.branches}  # type: ignore[union-attr]


def test_the_plan_covers_the_share_asked_and_weights_by_the_peak_minutes_requests(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    written = write_plan(
        profile, tmp_path / "plan.yaml", PlanOptions(cover_percent=80, min_share_percent=0, duration_s=60, ramp_up_s=10)
    )
    # Kept by the whole log's counts (138 and 51 of 210), weighted by their requests in the peak
    # minute (the first: requests 0 to 119, 75 items and 33 orders).
    assert branches_of(written.path) == pytest.approx(
        {"GET /items/{id}": 100 * 75 / 108, "POST /orders": 100 * 33 / 108}, abs=1e-3
    )
    assert written.covered_share == pytest.approx(189 / 210)
    total_ms = 138 * 10 + 51 * 100 + 21 * 5
    assert written.covered_time_share == pytest.approx((138 * 10 + 51 * 100) / total_ms, abs=1e-4)
    assert written.left_out == [
        {
            "endpoint": "GET /search?q",
            "requests": 21,
            "share_by_count": pytest.approx(0.1),
            "share_by_time": pytest.approx(105 / total_ms, abs=1e-6),
        }
    ]
    workload = load_plan_file(written.path).plan.scenarios[0].workload
    # The peak minute's 2 req/s for the endpoints' 108 of its 120 requests, plus 20 %.
    assert workload.type == "open" and workload.stages[-1].rate_per_s == pytest.approx(108 / 60 * 1.2)  # type: ignore[union-attr]
    assert [stage.duration_s for stage in workload.stages] == [10, 50]
    # The mean time of the mix sent, the peak minute's: (75 × 10 + 33 × 100) / 108 ms.
    assert written.sizing["mean_ms"] == pytest.approx(4050 / 108, rel=0.01)
    text = written.path.read_text()
    assert text.startswith("# Written by `horde profile` from 210 requests") and "horde sight" in text
    assert "# Left out: 1 endpoint, 10.00 % of the requests, 1.59 % of the time" in text
    assert "#   GET /search?q: 10.00 %, 1.59 %" in text
    # By default an endpoint at 1 % of the requests or of the time is kept whatever --cover says.
    kept = write_plan(profile, tmp_path / "kept.yaml", PlanOptions(cover_percent=80))
    assert set(branches_of(kept.path)) == {"GET /items/{id}", "POST /orders", "GET /search?q"} and not kept.left_out


def test_many_vus_share_a_pool(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    # 2 req/s × 300 = 600 arrivals/s: max_vus 1,200 (2 s each), past which VUs share a pool:
    # 4 × 600/s × the p95 (100 ms) = 240 connections.
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(headroom_percent=29_900))
    plan = load_plan_file(written.path).plan
    assert plan.scenarios[0].workload.max_vus == 1200  # type: ignore[union-attr]
    assert plan.target.connections.pool == pytest.approx(240, abs=3)  # type: ignore[union-attr]
    small = write_plan(profile, tmp_path / "small.yaml", PlanOptions())
    assert load_plan_file(small.path).plan.target.connections == "per_vu"


def test_by_time_takes_the_heaviest_first(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(cover_percent=50, by="time", min_share_percent=0))
    assert list(branches_of(written.path)) == ["POST /orders"]
    # --min-share 12 keeps what is significant by count though --cover by time is met: GET
    # /items/{id} (66 % of the requests); GET /search?q (10 %, and 1.6 % of the time) is under it.
    floor = write_plan(profile, tmp_path / "floor.yaml", PlanOptions(cover_percent=50, by="time", min_share_percent=12))
    assert list(branches_of(floor.path)) == ["POST /orders", "GET /items/{id}"]
    assert [row["endpoint"] for row in floor.left_out] == ["GET /search?q"]


def test_ids_from_a_feeder_file(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    written = write_plan(profile, tmp_path / "out" / "plan.yaml", PlanOptions(ids="feeder", cover_percent=100))
    # Only the endpoints with ids have a feeder (POST /orders, the first seen, has none); the
    # largest share first: GET /items/{id} (the third seen), GET /search?q (the second).
    assert [path.name for path in written.feeders] == ["endpoint_2.csv", "endpoint_1.csv"]
    assert list(csv.reader(written.feeders[1].open()))[0] == ["q"]
    rows = list(csv.reader(written.feeders[0].open()))
    assert rows[0] == ["id"] and {row[0] for row in rows[1:]} <= {str(i) for i in range(7)} and len(rows) == 101
    plan = load_plan_file(written.path).plan
    assert plan.scenarios[0].feeders[0].mode == "random"
    step = plan.scenarios[0].steps[0].branches[0].steps[0]  # type: ignore[union-attr]
    assert step.path == "/items/{{ endpoint_2.id }}"  # type: ignore[union-attr]


def test_users_model_with_think_times(tmp_path: Path) -> None:
    # Two users, a request every 10 s each (10 ms long): think 9.99 s, one user's rate ~0.1/s.
    lines = [
        combined_line(Hit(T0 + 10 * i + offset, "GET", f"/items/{i}", client=client))
        for i in range(30)
        for offset, client in ((0, "10.0.0.1"), (5, "10.0.0.2"))
    ]
    profile = build_profile([write_log(tmp_path / "a.log", lines)], ProfileOptions())
    written = write_plan(
        profile, tmp_path / "plan.yaml", PlanOptions(model="users", headroom_percent=0, ramp_up_s=0, duration_s=30)
    )
    plan = load_plan_file(written.path).plan
    scenario = plan.scenarios[0]
    assert scenario.workload.type == "closed"
    think = scenario.steps[1].think_time  # type: ignore[union-attr]
    assert think.type == "exponential" and think.mean_ms == pytest.approx(9990, rel=0.01)  # type: ignore[union-attr]
    # The peak minute has 12 requests: 0.2/s, at 0.1/s per user: 2 users.
    assert written.sizing["users"] == 2 and scenario.workload.stages[0].vus == 2  # type: ignore[union-attr]


def test_find_max_sized_the_seeds_way(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(find_max=True, headroom_percent=900))
    plan = load_plan_file(written.path).plan
    assert plan.steer is not None and plan.steer.type == "find_max"
    # 2 req/s × 10 = 20 req/s, in 20 steps: 1 arrival/s each.
    assert (plan.steer.start, plan.steer.step, plan.steer.step_duration_s) == (1, 1, 30)  # type: ignore[union-attr]
    assert written.sizing["find_max_command"].endswith("--find-max --start 1 --step 1 --step-duration 30s")


def test_choices_the_log_cannot_honour(tmp_path: Path) -> None:
    # No durations, and each request from another client: no think time either.
    untimed = [combined_line(Hit(T0 + i, "GET", "/", client=f"10.0.0.{i}"), nginx_times=False) for i in range(5)]
    profile = build_profile([write_log(tmp_path / "a.log", untimed)], ProfileOptions())
    for options, words in (
        (PlanOptions(by="time"), "needs response times"),
        (PlanOptions(model="users"), "think times"),
        (PlanOptions(ids="all"), "--ids"),
    ):
        with pytest.raises(InvalidInput) as error:
            write_plan(profile, tmp_path / "plan.yaml", options)
        assert words in error.value.message and error.value.hint


# -- the page and the command ----------------------------------------------------------------


def test_the_page(tmp_path: Path) -> None:
    profile = build_profile([known_log(tmp_path)], ProfileOptions())
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions())
    html = render_page(profile, written)
    assert html.startswith("<!DOCTYPE html>") and "Plotly.newPlot" in html and "<script src" not in html
    assert 'id="rate-chart"' in html and 'id="shares-chart"' in html and "share by time" in html
    assert 'data-endpoint="POST /orders"' in html and "horde sight" in html
    assert "from the stored run" not in html  # the profile's own footer


MARKERS = (
    "MARKERTOKEN123",
    "marker.person",
    "MARKERCOOKIE42",
    "MARKERSIG77",
    "MrkQ9",
    "MARKERKEYLETTERS",
    "qZkTwRbXmPvLsNdH",
)


def marked_log(tmp_path: Path) -> Path:
    lines = []
    for i in range(60):
        targets = [
            f"/api/items/{i % 5}?token=MARKERTOKEN123&page=1",
            f"/users/marker.person@example.org/feed?sig=MARKERSIG77",
            f"/search?contact=marker.person%40example.org&q=x",
            "/reset-token/MrkQ9",  # short, after a secret-named segment
            "/api/key/MARKERKEYLETTERS",  # letters only, after one
            "/dl/qZkTwRbXmPvLsNdH",
        ]  # letters only in a random mix, after none
        hit = Hit(
            T0 + i, "GET", targets[i % 6], client=f"10.0.0.{i % 4}", cookie=f"lang=en; sessionid=MARKERCOOKIE42{i % 4}"
        )
        lines.append(combined_line(hit))
    lines.append("broken line with token=MARKERTOKEN123 and marker.person@example.org")
    return write_log(tmp_path / "access.log", lines)


@pytest.mark.parametrize("ids", ["seen", "feeder"])
def test_secrets_never_leave_the_log(horde_cli: HordeCli, tmp_path: Path, ids: str) -> None:
    log = marked_log(tmp_path)
    out = tmp_path / "out"
    result = horde_cli.run(
        "profile",
        str(log),
        "--session",
        "cookie:sessionid",
        "--ids",
        ids,
        "--plan",
        str(out / "plan.yaml"),
        "--json",
        str(out / "profile.json"),
        "--html",
        str(out / "page.html"),
    )
    assert result.returncode == 0, result.stderr
    written = [path for path in out.rglob("*") if path.is_file()]
    assert len(written) >= 3
    for marker in MARKERS:
        assert marker not in result.stdout and marker not in result.stderr, marker
        for path in written:
            assert marker not in path.read_text(), (marker, path)
    assert "did not parse" in result.stderr and "access.log:61" in result.stderr  # the broken line, shown redacted
    plan = load_plan_file(out / "plan.yaml").plan
    assert plan.parameters == {"token": "redacted", "sig": "redacted"}
    data = json.loads((out / "profile.json").read_text())
    assert data["sessions"]["sessions"] == 4 and data["plan"]["path"] == str(out / "plan.yaml")
    assert {"GET /reset-token/{secret}", "GET /api/key/{secret}", "GET /dl/{token}"} <= {
        row["endpoint"] for row in data["endpoints"]
    }


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--format", "apache"], "--format"),
        (["--cover", "0"], "--cover"),
        (["--cover", "150"], "--cover"),
        (["--headroom", "-5"], "--headroom"),
        (["--session", "cookie"], "--session"),
        (["--session-gap", "soon"], "--session-gap"),
        (["--field", "colour=x"], "--field"),
        (["--field", "path=uri"], "--field names JSON fields"),
        (["--time-unit", "h"], "--time-unit"),
        (["--top", "0"], "--top"),
        (["--template", "users/{id}"], "--template"),
        (["--duration", "1m", "--ramp-up", "2m"], "--ramp-up"),
        (["--plan", "PLAN", "--model", "crowd"], "--model"),
        (["--plan", "PLAN", "--by", "size"], "--by"),
        (["--plan", "PLAN", "--peak", "day"], "--peak"),
        (["--json", "."], "is a directory"),
    ],
)
def test_bad_flags_exit_2_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    log = write_log(tmp_path / "a.log", [combined_line(Hit(T0 + i, "GET", "/")) for i in range(3)])
    args = [str(tmp_path / "plan.yaml") if arg == "PLAN" else str(tmp_path) if arg == "." else arg for arg in args]
    code = main(["profile", str(log), *args])
    err = capsys.readouterr().err
    assert code == ExitCode.INVALID_INPUT, err
    assert "error:" in err and "hint:" in err and words in err and "Traceback" not in err


def test_a_bad_choice_is_told_before_the_log_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unreadable = write_log(tmp_path / "a.jsonl", ['{"time": 1, "path": "/"}'] * 5)  # not nginx
    assert main(["profile", str(unreadable), "--format", "nginx", "--model", "crowd"]) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err
    assert "--model" in err and "lines" not in err


def test_a_missing_log_and_a_wrong_format_exit_2(horde_cli: HordeCli, tmp_path: Path) -> None:
    result = horde_cli.run("profile", str(tmp_path / "nowhere.log"))
    assert result.returncode == 2 and "no such file" in result.stderr and "hint:" in result.stderr
    log = write_log(tmp_path / "a.jsonl", ['{"time": 1, "path": "/"}'] * 5)
    result = horde_cli.run("profile", str(log), "--format", "nginx")
    assert result.returncode == 2 and "5 of 5 lines" in result.stderr and "--format" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_gzip_of_zeros_exits_2_saying_it_is_no_log(horde_cli: HordeCli, tmp_path: Path) -> None:
    from test_profile_logs import zeros_gzip

    result = horde_cli.run("profile", str(zeros_gzip(tmp_path / "zeros.gz", 64)), timeout=30)
    assert result.returncode == ExitCode.INVALID_INPUT, result.stderr
    assert "not a text log" in result.stderr and "hint:" in result.stderr and "Traceback" not in result.stderr


def test_the_table_and_the_rate(horde_cli: HordeCli, tmp_path: Path) -> None:
    result = horde_cli.run("profile", str(known_log(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "GET /items/{id}" in result.stdout and "peak minute 2 req/s" in result.stdout
    assert "lines/s" in result.stderr and "\r" not in result.stderr  # no progress bar off a terminal


# -- one endpoint, one row; the plan on disk only once checked; the peak hour of a short log ----

HEX_IDS = ["1a2b3c4d", "12345678", "deadbeef99", "87654321", "0badf00d", "20240301"]  # some all digits


def hex_id_log(tmp_path: Path) -> Path:
    lines = [combined_line(Hit(T0 + i, "GET", f"/api/items/{HEX_IDS[i % len(HEX_IDS)]}")) for i in range(60)]
    lines += [combined_line(Hit(T0 + 60 + i, "POST", "/api/cart")) for i in range(10)]
    return write_log(tmp_path / "access.log", lines)


def test_one_endpoint_is_one_row_whatever_the_kinds_of_its_ids(tmp_path: Path) -> None:
    profile = build_profile([hex_id_log(tmp_path)], ProfileOptions())
    assert [(stats.name, stats.count) for stats in profile.endpoints] == [
        ("GET /api/items/{id}", 60),
        ("POST /api/cart", 10),
    ]
    items = profile.endpoints[0]
    assert items.slot_kinds(0) == {"int", "hex"} and {sample[0] for sample in items.samples} == set(HEX_IDS)
    out = tmp_path / "out"
    # The peak hour: the cart's 10 requests come in the minute after the items' 60.
    assert (
        main(
            [
                "profile",
                str(tmp_path / "access.log"),
                "--plan",
                str(out / "plan.yaml"),
                "--cover",
                "100",
                "--peak",
                "hour",
                "--json",
                str(out / "profile.json"),
            ]
        )
        == ExitCode.OK
    )
    assert branches_of(out / "plan.yaml") == pytest.approx(
        {"GET /api/items/{id}": 100 * 60 / 70, "POST /api/cart": 100 * 10 / 70}, abs=1e-3
    )
    data = json.loads((out / "profile.json").read_text())
    assert [row["endpoint"] for row in data["endpoints"]] == ["GET /api/items/{id}", "POST /api/cart"]


def test_a_plan_that_fails_its_check_is_not_left_on_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from horde.engine import written_plan
    from horde.errors import PlanInvalid, Problem

    def refused(plan: object, *, locate: object = None, source: str = "") -> str:
        raise PlanInvalid([Problem("scenarios[0].steps[0]", "refused by the engine")], source=source)

    log = known_log(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.yaml").write_text("# an older plan\n")
    monkeypatch.setattr(written_plan, "checked_plan_json", refused)
    code = main(
        [
            "profile",
            str(log),
            "--ids",
            "feeder",
            "--plan",
            str(out / "plan.yaml"),
            "--json",
            str(out / "profile.json"),
            "--html",
            str(out / "page.html"),
        ]
    )
    err = capsys.readouterr().err
    assert code == ExitCode.INVALID_INPUT and "plan.yaml (not written)" in err and "refused by the engine" in err
    # No plan, no temporary file, no feeder files; the profile's JSON and page describe the log all the same.
    assert sorted(path.name for path in out.iterdir()) == ["old.yaml", "page.html", "profile.json"]
    assert json.loads((out / "profile.json").read_text())["plan"] is None
    # An older plan at the path stays as it was.
    code = main(["profile", str(log), "--plan", str(out / "old.yaml")])
    assert code == ExitCode.INVALID_INPUT and (out / "old.yaml").read_text() == "# an older plan\n"
    assert sorted(path.name for path in out.iterdir()) == ["old.yaml", "page.html", "profile.json"]


def test_the_peak_hour_of_a_log_under_an_hour_is_over_its_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 16 minutes from 10:03: 60 requests a minute, and 1,200 in the busiest (20 req/s).
    start = T0 + 180
    times = [
        start + 60 * minute + i * 60 / (1200 if minute == 5 else 60)
        for minute in range(16)
        for i in range(1200 if minute == 5 else 60)
    ]
    log = write_log(tmp_path / "a.log", [combined_line(Hit(t, "GET", "/")) for t in times])
    profile = build_profile([log], ProfileOptions())
    assert profile.peak_per_s("minute") == 20.0
    assert profile.peak_per_s("hour") == pytest.approx(2100 / 960)  # not 2,100 / 3,600
    assert profile.to_dict()["rate"]["peak_hour"] == {
        "at": "2024-03-01T10:03:00Z",
        "requests": 2100,
        "minutes": 16,
        "per_s": pytest.approx(2.188, abs=1e-3),
    }
    written = write_plan(profile, tmp_path / "plan.yaml", PlanOptions(peak="hour", headroom_percent=0))
    assert written.sizing["rate_per_s"] == pytest.approx(2100 / 960, abs=1e-3) and written.sizing["peak_minutes"] == 16
    assert "(over the 16 minutes of it the log covers)" in written.path.read_text()
    assert main(["profile", str(log)]) == ExitCode.OK
    assert (
        "peak hour 2.188 req/s at 2024-03-01T10:03:00Z (over the 16 minutes of it the log covers)"
        in capsys.readouterr().out
    )
    # A full hour is over its 3,600 s.
    long_log = write_log(tmp_path / "b.log", [combined_line(Hit(T0 + 30 * i, "GET", "/")) for i in range(240)])
    assert build_profile([long_log], ProfileOptions()).peak_per_s("hour") == pytest.approx(120 / 3600)
