"""The native log reader (crate ``horde-logs``, :mod:`horde.profile.native`) against the Python
reader: on generated logs with a known truth, the profile, the endpoints' shapes and sampled ids
and the sessions are the same, and the truth is what both say."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from horde.cli import profile as cli_profile
from horde.cli.app import main
from horde.errors import ExitCode, InvalidInput
from horde.profile import ProfileOptions, SessionKey, build_profile
from horde.profile.logs import (
    EARLY_CHECK_LINES,
    JsonParser,
    PROGRESS_EVERY,
    ReadCounts,
    in_time_order,
    make_parser,
    read_records,
)
from horde.profile.profile import Profile, ProfileBuilder
from profile_logs import T0, Hit, combined_line, json_line, write_log
from profile_truth import PEAK_ENDPOINTS, write_truth_log

ENDPOINTS = [  # (method, target with {} for an id, count weight, seconds)
    ("GET", "/api/items/{}", 30, 0.010),
    ("GET", "/api/items/{}/reviews?page={}&token=t{}", 10, 0.030),
    ("POST", "/api/orders", 8, 0.200),
    ("GET", "/api/users/{}/orders?sig={}", 8, 0.020),
    ("GET", "/", 15, 0.001),
    ("GET", "/static/app.{}.js", 10, 0.002),
    ("POST", "/api/refunds/{}", 3, 1.500),
    ("GET", "/search?q=shoe{}&page={}", 7, 0.050),
    ("GET", "/reset-token/{}", 2, 0.005),
    ("GET", "/u/{}%40example.org/profile", 2, 0.004),
    ("GET", "/k/{}", 2, 0.003),
    ("DELETE", "/api/cart/{}", 3, 0.0004),
]
TRUTH_NAMES = [
    "GET /api/items/{id}",
    "GET /api/items/{id}/reviews?page&token",
    "POST /api/orders",
    "GET /api/users/{id}/orders?sig",
    "GET /",
    "GET /static/app.{id}.js",
    "POST /api/refunds/{id}",
    "GET /search?q&page",
    "GET /reset-token/{secret}",
    "GET /u/{email}/profile",
    "GET /k/{token}",
    "DELETE /api/cart/{id}",
]


def generated(
    tmp_path: Path,
    lines: int,
    *,
    seed: int = 7,
    cookie: bool = False,
    name: str = "access.log",
    gzipped: bool = False,
    start: float = T0,
    as_json: bool = False,
) -> tuple[Path, dict[str, int]]:
    """A log of ``lines`` requests over an hour (busier at its middle), with ids of several
    kinds, secrets, 4xx/5xx, 300 clients, times a little out of order, a few bad lines and
    blank lines; and the requests each endpoint got."""
    rng = random.Random(seed)
    truth = dict.fromkeys(TRUTH_NAMES, 0)
    out = []
    for i in range(lines):
        index = rng.choices(range(len(ENDPOINTS)), weights=[e[2] for e in ENDPOINTS])[0]
        method, template, _, seconds = ENDPOINTS[index]
        ident = rng.choice(
            [str(rng.randrange(1, 10**6)), f"{rng.getrandbits(48):012x}", "deadbeef" + str(rng.randrange(10))]
        )
        if index == 10:
            ident = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(18))
        elif index == 9:
            ident = f"user{rng.randrange(99)}"
        target = template.format(
            ident if index != 5 else f"{rng.getrandbits(40):010x}", rng.randrange(1, 9), rng.randrange(10**6)
        )
        t = start + 3600 * i / lines + rng.choice([0, 0, 0, -1, -2])  # nginx logs at the response: a bit out of order
        client = rng.randrange(300)
        hit = Hit(
            t,
            method,
            target,
            status=rng.choice([200, 200, 200, 201, 404, 500]),
            seconds=rng.expovariate(1 / seconds) if rng.random() > 0.02 else None,
            client=f"10.0.{client // 250}.{client % 250}",
            agent=f"agent-{client % 3}",
            cookie=f"sid=s{client % 40}; lang=en" if cookie and client % 10 else None,
        )
        truth[TRUTH_NAMES[index]] += 1
        out.append(json_line(hit) if as_json else combined_line(hit))
        if i % 997 == 5:
            out.append("not a log line")
        if i % 1500 == 7:
            out.append("   ")
    return write_log(tmp_path / name, out, gzipped=gzipped), truth


def python_profile(paths: list[Path], options: ProfileOptions) -> Profile:
    """The profile as the Python reader adds it up, request by request (the logs ordered as
    build_profile orders them)."""
    parser = make_parser(options.format, paths, options.fields, options.time_unit, options.session)
    paths = in_time_order(paths, parser)
    builder = ProfileBuilder(options)
    counts = ReadCounts()
    for record in read_records(paths, parser, counts):
        builder.add(record)
    return builder.finish(
        [str(path) for path in paths], parser.format, counts, parser.fields if isinstance(parser, JsonParser) else {}
    )


def assert_same(native: Profile, python: Profile) -> None:
    ours, theirs = native.to_dict(), python.to_dict()
    ours["source"]["read_s"] = theirs["source"]["read_s"] = 0
    assert ours == theirs
    assert [(e.index, e.shapes, e.samples, e.statuses) for e in native.endpoints] == [
        (e.index, e.shapes, e.samples, e.statuses) for e in python.endpoints
    ]
    # Each endpoint's requests per minute (what its intensity in a window is counted from).
    assert [e.per_minute for e in native.endpoints] == [e.per_minute for e in python.endpoints]
    assert (native.other and native.other.per_minute) == (python.other and python.other.per_minute)
    assert native.sessions.lengths == python.sessions.lengths
    assert native.sessions.transitions == python.sessions.transitions
    assert native.sessions.think_ms.buckets == python.sessions.think_ms.buckets
    assert native.counts == python.counts


def test_the_native_reader_adds_up_what_the_python_reader_does(tmp_path: Path) -> None:
    path, truth = generated(tmp_path, 20_000)
    native = build_profile([path], ProfileOptions(session_gap_s=60))
    assert_same(native, python_profile([path], ProfileOptions(session_gap_s=60)))
    assert {stats.name: stats.count for stats in native.endpoints} == truth
    assert native.counts.bad == 21 and native.counts.bad_samples[0].line == 7
    assert native.requests == 20_000 and native.sessions.count > 300  # 60 s gaps end sessions


def test_json_lines_give_the_python_readers_profile(tmp_path: Path) -> None:
    path, truth = generated(tmp_path, 20_000, cookie=True, as_json=True)
    for options in (
        ProfileOptions(session_gap_s=60),
        ProfileOptions(session=SessionKey("cookie", "sid"), max_endpoints=6),
    ):
        native = build_profile([path], options)
        assert native.format == "json" and native.fields["duration"] == "duration_ms"
        assert_same(native, python_profile([path], options))
    assert {stats.name: stats.count for stats in build_profile([path], ProfileOptions()).endpoints} == truth


@pytest.mark.parametrize(
    "options",
    [
        ProfileOptions(format="nginx", time_unit="ms"),
        ProfileOptions(max_endpoints=4),
        ProfileOptions(session=SessionKey("cookie", "sid"), session_gap_s=120),
        ProfileOptions(
            templates=("/api/items/{item}", "POST /api/refunds/{refund}", "/u/{who}/profile", "/reset-token/{code}")
        ),
    ],
    ids=["nginx-ms", "other-endpoints", "cookie-sessions", "given-templates"],
)
def test_options_give_the_same_profile(tmp_path: Path, options: ProfileOptions) -> None:
    path, _ = generated(tmp_path, 5000, cookie=True)
    assert_same(build_profile([path], options), python_profile([path], options))


def test_rotated_gzip_logs_read_as_one_stream(tmp_path: Path) -> None:
    older, first = generated(tmp_path, 3000, seed=1, name="access.log.2.gz", gzipped=True)
    middle, second = generated(tmp_path, 3000, seed=2, name="access.log.1", start=T0 + 3600)
    newer, third = generated(tmp_path, 3000, seed=3, name="access.log", start=T0 + 7200)
    paths = [older, middle, newer]
    # Given newest first (as `ls access.log*` lists them), read oldest first.
    native = build_profile([newer, middle, older], ProfileOptions())
    assert native.files == [str(path) for path in paths]
    assert_same(native, python_profile(paths, ProfileOptions()))
    assert {stats.name: stats.count for stats in native.endpoints} == {
        name: first[name] + second[name] + third[name] for name in first
    }
    # Three hours, and the minute before: the first lines step back up to 2 s (logged at the response).
    assert native.span_minutes() == 181 and native.counts.bytes_read == sum(path.stat().st_size for path in paths)


def test_a_log_in_another_format_is_refused_as_the_python_reader_refuses_it(tmp_path: Path) -> None:
    path = write_log(tmp_path / "access.log", ['{"json": 1}'] * 10 + [combined_line(Hit(T0, "GET", "/"))] * 5)
    with pytest.raises(
        InvalidInput, match=r"10 of 15 lines of .* do not read as the combined format; line 1: not the combined format"
    ):
        build_profile([path], ProfileOptions(format="combined"))


def test_logs_of_several_servers_are_merged_in_time_order(tmp_path: Path) -> None:
    """Ten clients, each a request every 20 s for an hour, served in turn by two servers whose
    logs overlap in time: read as one stream, each client is one session of 180 requests 20 s
    apart (read one log after the other, each log alone paces them 40 s apart)."""
    lines: dict[str, list[str]] = {"a": [], "b": []}
    for step in range(180):
        for client in range(10):
            hit = Hit(T0 + 20 * step + client, "GET", f"/items/{step}", client=f"10.0.0.{client}")
            lines["a" if step % 2 else "b"].append(combined_line(hit))
    paths = [write_log(tmp_path / f"{name}.log", found) for name, found in lines.items()]
    options = ProfileOptions(session_gap_s=60)
    native = build_profile(paths, options)
    assert_same(native, python_profile(paths, options))
    assert native.sessions.count == 10 and native.sessions.lengths == {180: 10}
    assert native.sessions.think_ms.count == 10 * 179
    # 20 s between a client's requests, less the 10 ms each takes: not 40 s (one log's pace).
    assert native.sessions.think_ms.percentile(5) == pytest.approx(19_990, rel=0.01)
    assert native.sessions.think_ms.percentile(95) == pytest.approx(19_990, rel=0.01)


def test_progress_is_told_as_the_native_reading_goes(tmp_path: Path) -> None:
    count = PROGRESS_EVERY + 10_000  # past the reader's 256 KiB buffer
    path = write_log(tmp_path / "a.log", [combined_line(Hit(T0 + i // 1000, "GET", "/")) for i in range(count)])
    seen: list[tuple[int, int]] = []
    build_profile([path], ProfileOptions(), lambda counts: seen.append((counts.lines, counts.bytes_read)))
    assert [lines for lines, _ in seen] == [EARLY_CHECK_LINES, PROGRESS_EVERY, count]
    assert 0 < seen[0][1] <= seen[1][1] < seen[2][1] == path.stat().st_size


def test_off_a_terminal_progress_is_a_line_now_and_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_profile, "PROGRESS_EVERY_S", 0.0)
    path, _ = generated(tmp_path, PROGRESS_EVERY + 10)
    assert main(["profile", str(path), "--json", str(tmp_path / "p.json")]) == ExitCode.OK
    err = capsys.readouterr().err
    assert f"reading: {PROGRESS_EVERY:,} lines (" in err and "\r" not in err


def test_the_truth_log_of_the_plan_tests_gives_the_python_readers_profile(tmp_path: Path) -> None:
    """The log the plan tests check the plan against (tests/profile_truth.py), through both readers."""
    truth = write_truth_log(tmp_path / "truth.log")
    path = tmp_path / "truth.log"
    native = build_profile([path], ProfileOptions())
    assert_same(native, python_profile([path], ProfileOptions()))
    assert {stats.name: stats.count for stats in native.endpoints} == truth.counts


def test_both_readers_count_each_endpoints_requests_per_minute_as_written(tmp_path: Path) -> None:
    """The truth log with an endpoint only at the peak hour and one only off it: each endpoint's
    requests per minute are the truth's, through both readers, and only the minutes it had
    requests in are kept."""
    truth = write_truth_log(tmp_path / "truth.log", PEAK_ENDPOINTS)
    native = build_profile([truth.path], ProfileOptions())
    assert_same(native, python_profile([truth.path], ProfileOptions()))
    known: dict[str, dict[int, int]] = {}
    for minute, counts in truth.per_minute.items():
        for name, count in counts.items():
            known.setdefault(name, {})[minute] = count
    assert {stats.name: stats.per_minute for stats in native.endpoints} == known
    rows = {row["endpoint"]: row for row in native.to_dict()["endpoints"]}
    peak_hour = truth.in_minutes(truth.peak_hour_first(), 60)
    assert rows["POST /api/settlements/batch"]["peak_hour_requests"] == peak_hour["POST /api/settlements/batch"] == 300
    assert (
        rows["GET /api/reports/nightly"]["peak_hour_requests"]
        == 0
        == len(
            [
                m
                for m in known["GET /api/reports/nightly"]
                if truth.peak_hour_first() <= m < truth.peak_hour_first() + 60
            ]
        )
    )
    peak_minute = truth.in_minutes(truth.peak_minute(), 1)
    assert {name: row["peak_minute_requests"] for name, row in rows.items()} == peak_minute
