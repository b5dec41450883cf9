"""`horde profile` reading logs: the formats, gzip, JSON field guessing, units, bad lines counted
with their line numbers, a log in the wrong format refused with a hint; and the parsers fuzzed
(whatever a line holds, a request or a reason, never an exception)."""

from __future__ import annotations

import doctest
import gzip
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from horde.errors import InvalidInput
from horde.profile import endpoints, histogram, logs, plan_writer, profile, sessions
from horde.profile.logs import JsonParser, LogRecord, ReadCounts, SessionKey, TextParser, make_parser, read_records
from profile_logs import T0, Hit, clf, combined_line, json_line, write_log


def read_all(paths: list[Path], fmt: str = "auto", **kwargs: object) -> tuple[list[LogRecord], ReadCounts, str]:
    parser = make_parser(
        fmt,
        paths,
        dict(kwargs.pop("fields", {})),
        kwargs.pop("time_unit", None),  # type: ignore[arg-type]
        kwargs.pop("session", SessionKey("ip-ua")),
    )  # type: ignore[arg-type]
    counts = ReadCounts()
    return list(read_records(paths, parser, counts)), counts, parser.format


def test_doctests() -> None:
    for module in (logs, endpoints, histogram, profile, sessions, plan_writer):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_nginx_combined_with_request_time(tmp_path: Path) -> None:
    hit = Hit(T0 + 5, "POST", "/api/orders?page=2", status=201, seconds=0.125, client="192.0.2.7", agent="curl/8.0")
    path = write_log(tmp_path / "access.log", [combined_line(hit)])
    records, counts, fmt = read_all([path])
    assert fmt == "combined" and counts.lines == 1 and counts.bad == 0
    record = records[0]
    assert (record.time_s, record.method, record.target, record.status) == (T0 + 5, "POST", "/api/orders?page=2", 201)
    assert record.duration_ms == pytest.approx(125.0)
    assert (record.client, record.agent) == ("192.0.2.7", "curl/8.0")


@pytest.mark.parametrize(
    ("tail", "fmt", "expected_ms"),
    [
        (" 0.250", "combined", 250.0),  # nginx's $request_time: seconds with a point
        (" 250000", "combined", 250.0),  # Apache's %D: microseconds
        (" 2", "nginx", 2000.0),  # a whole number in the nginx format: seconds
        (" 0.125 key=value", "combined", 125.0),  # pairs, but none of them a time
        (' rt=0.042 uct="0.000" urt="0.040"', "combined", 42.0),  # key=value pairs: rt first
        (' urt="0.040"', "combined", 40.0),
        ("", "combined", None),  # plain combined: no time
    ],
)
def test_the_time_after_the_agent(tmp_path: Path, tail: str, fmt: str, expected_ms: float | None) -> None:
    line = combined_line(Hit(T0, "GET", "/"), nginx_times=False) + tail
    records, _, _ = read_all([write_log(tmp_path / "a.log", [line])], fmt)
    assert records[0].duration_ms == (pytest.approx(expected_ms) if expected_ms is not None else None)


def test_time_zones_and_escaped_quotes(tmp_path: Path) -> None:
    line = (
        f'10.0.0.1 - - [{clf(T0).replace("+0000", "+0200")}] "GET /a\\"b HTTP/1.1" 200 1 "-" "agent \\"quoted\\"" 0.001'
    )
    records, counts, _ = read_all([write_log(tmp_path / "a.log", [line])])
    assert counts.bad == 0
    assert records[0].time_s == T0 - 7200 and records[0].target == '/a\\"b' and records[0].agent == 'agent \\"quoted\\"'


def test_times_within_a_minute_and_across_zones() -> None:
    parser = TextParser("combined", None, SessionKey("ip-ua"))
    stamps = [
        "01/Mar/2024:10:00:05 +0000",
        "01/Mar/2024:10:00:59 +0000",
        "01/Mar/2024:10:00:59 +0100",
        "01/Mar/2024:10:01:00 +0000",
        "01/Mar/2024:10:01:xx +0000",
        "01/Mar/2024:10:01:07 +0000",
    ]
    got = [parser(f'1.2.3.4 - - [{stamp}] "GET / HTTP/1.1" 200 1') for stamp in stamps]
    assert [g.time_s if isinstance(g, LogRecord) else g for g in got] == [
        T0 + 5,
        T0 + 59,
        T0 + 59 - 3600,
        T0 + 60,
        "the time is not [day/Mon/year:hh:mm:ss zone]",
        T0 + 67,
    ]


def test_a_proxy_request_keeps_the_path(tmp_path: Path) -> None:
    line = f'10.0.0.1 - - [{clf(T0)}] "GET http://example.org/x/y?z=1 HTTP/1.1" 200 1 "-" "a"'
    records, _, _ = read_all([write_log(tmp_path / "a.log", [line])])
    assert records[0].target == "/x/y?z=1"


def test_gzip_is_told_by_its_bytes(tmp_path: Path) -> None:
    lines = [combined_line(Hit(T0 + i, "GET", f"/items/{i}")) for i in range(100)]
    path = write_log(tmp_path / "access.log.1", lines, gzipped=True)  # no .gz in the name
    records, counts, _ = read_all([path])
    assert len(records) == 100 and counts.lines == 100 and counts.bytes_read == path.stat().st_size


def test_several_files_are_read_in_the_order_given(tmp_path: Path) -> None:
    older = write_log(
        tmp_path / "access.log.2.gz", [combined_line(Hit(T0 + i, "GET", "/a")) for i in range(3)], gzipped=True
    )
    newer = write_log(
        tmp_path / "access.log", [combined_line(Hit(T0 + 10 + i, "GET", "/b")) for i in range(2)] + ["junk"]
    )
    records, counts, _ = read_all([older, newer])
    assert [r.target for r in records] == ["/a"] * 3 + ["/b"] * 2
    assert counts.lines == 6 and counts.bad == 1 and counts.bad_samples[0].source == str(newer)
    assert counts.bad_samples[0].line == 3  # numbered within its own file


def test_json_fields_are_guessed(tmp_path: Path) -> None:
    hit = Hit(T0 + 1.5, "DELETE", "/api/items/9", status=204, seconds=0.0075, client="198.51.100.1")
    records, _, fmt = read_all([write_log(tmp_path / "a.jsonl", [json_line(hit)])])
    assert fmt == "json"
    record = records[0]
    assert (record.time_s, record.method, record.target, record.status) == (T0 + 1.5, "DELETE", "/api/items/9", 204)
    assert record.duration_ms == pytest.approx(7.5) and record.client == "198.51.100.1"


def test_json_fields_given_nested_and_units_from_values(tmp_path: Path) -> None:
    lines = [
        json.dumps(
            {
                "when": T0 * 1000,
                "http": {"verb": "put", "target": "/x", "code": "503"},
                "latency": "0.25s",
                "args": "a=1",
            }
        )
    ]
    records, _, _ = read_all(
        [write_log(tmp_path / "a.log", lines)],
        "json",
        fields={
            "time": "when",
            "method": "http.verb",
            "path": "http.target",
            "status": "http.code",
            "duration": "latency",
            "query": "args",
        },
    )
    record = records[0]
    assert (record.time_s, record.method, record.target, record.status) == (T0, "PUT", "/x?a=1", 503)
    assert record.duration_ms == pytest.approx(250.0)


def test_json_request_line_and_time_unit(tmp_path: Path) -> None:
    lines = [json.dumps({"time_local": clf(T0), "request": "GET /r?q=1 HTTP/2.0", "status": 200, "took": 3})]
    records, _, _ = read_all([write_log(tmp_path / "a.log", lines)], time_unit="s")
    assert records[0].target == "/r?q=1" and records[0].duration_ms == pytest.approx(3000.0)


def test_json_without_a_path_field_names_the_flag(tmp_path: Path) -> None:
    path = write_log(tmp_path / "a.log", [json.dumps({"time": T0, "weird": "/x"})])
    with pytest.raises(InvalidInput) as error:
        read_all([path])
    assert (
        "path" in error.value.message
        and "--field path=NAME" in (error.value.hint or "")
        and "weird" in (error.value.hint or "")
    )


def test_bad_lines_are_counted_with_their_numbers(tmp_path: Path) -> None:
    good = [combined_line(Hit(T0 + i, "GET", "/")) for i in range(20)]
    lines = (
        good[:5]
        + ["garbage ?token=s3cr3t-value"]
        + good[5:10]
        + [""]
        + good[10:]
        + ['1.2.3.4 - - [nonsense] "GET / HTTP/1.1" 200 1']
    )
    records, counts, _ = read_all([write_log(tmp_path / "a.log", lines)])
    assert len(records) == 20 and counts.bad == 2 and counts.lines == 23
    assert [(bad.line, bad.reason) for bad in counts.bad_samples] == [
        (6, "not the combined format"),
        (23, "the time is not [day/Mon/year:hh:mm:ss zone]"),
    ]
    assert "s3cr3t" not in counts.bad_samples[0].text  # shown redacted


def test_a_json_line_nested_past_the_recursion_limit_is_a_bad_line(tmp_path: Path) -> None:
    good = [json_line(Hit(T0 + i, "GET", "/")) for i in range(20)]
    deep = '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"
    records, counts, _ = read_all([write_log(tmp_path / "a.log", good[:10] + [deep] + good[10:])], "json")
    assert len(records) == 20 and counts.bad == 1 and counts.bad_samples[0].line == 11


def test_a_log_in_the_wrong_format_is_refused_with_a_hint(tmp_path: Path) -> None:
    lines = [json_line(Hit(T0, "GET", "/"))] * 10
    with pytest.raises(InvalidInput) as error:
        read_all([write_log(tmp_path / "a.log", lines)], "combined")
    assert "10 of 10 lines" in error.value.message and "--format json" in (error.value.hint or "")


def test_mostly_bad_lines_are_refused_early(tmp_path: Path) -> None:
    # Line EARLY_CHECK_LINES itself reads: the check does not wait for a bad one.
    lines = ["not a log line"] * (logs.EARLY_CHECK_LINES - 2) + [combined_line(Hit(T0, "GET", "/"))] * 2 + ["x"] * 10
    path = write_log(tmp_path / "a.log", lines)
    parser = make_parser("combined", [path], {}, None, SessionKey("ip-ua"))
    counts = ReadCounts()
    with pytest.raises(InvalidInput):
        for _ in read_records([path], parser, counts):
            pass
    assert counts.bad == logs.EARLY_CHECK_LINES - 2  # stopped there, not at the end


@pytest.mark.parametrize(("flag", "value"), [("format", "apache"), ("time_unit", "h")])
def test_bad_format_and_unit_are_refused(tmp_path: Path, flag: str, value: str) -> None:
    path = write_log(tmp_path / "a.log", [combined_line(Hit(T0, "GET", "/"))])
    with pytest.raises(InvalidInput) as error:
        make_parser(
            value if flag == "format" else "auto",
            [path],
            {},
            value if flag == "time_unit" else None,
            SessionKey("ip-ua"),
        )
    assert error.value.hint


def test_session_keys() -> None:
    assert SessionKey.parse("cookie:sid") == SessionKey("cookie", "sid")
    assert str(SessionKey.parse("header:X-User")) == "header:X-User"
    with pytest.raises(InvalidInput):
        SessionKey.parse("cookie:")


def test_the_session_cookie_is_read_from_text_and_json(tmp_path: Path) -> None:
    hit = Hit(T0, "GET", "/", cookie="lang=en; sessionid=abc123; theme=dark")
    key = SessionKey("cookie", "sessionid")
    assert TextParser("combined", None, key)(combined_line(hit)).session == "abc123"  # type: ignore[union-attr]
    text = json_line(hit)
    parser = JsonParser.guess({}, [text], None, key)
    assert parser(text).session == "abc123"  # type: ignore[union-attr]
    header = JsonParser.guess(
        {}, [json.dumps({"time": T0, "path": "/", "http_x_user": "u1"})], None, SessionKey("header", "X-User")
    )
    assert header(json.dumps({"time": T0, "path": "/", "http_x_user": "u1"})).session == "u1"  # type: ignore[union-attr]


# -- fuzzing -------------------------------------------------------------------------------------

TEXT = TextParser("combined", None, SessionKey("cookie", "sid"))
JSON = JsonParser(
    {
        "time": "time",
        "path": "path",
        "method": "method",
        "status": "status",
        "duration": "duration",
        "client": "client",
        "agent": "agent",
        "cookie": "cookie",
    },
    {},
    None,
    SessionKey("cookie", "sid"),
)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_any_text_line_parses_or_gives_a_reason(line: str) -> None:
    for parser in (TEXT, JSON):
        result = parser(line)
        assert isinstance(result, (LogRecord, str))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["time", "path", "method", "status", "duration", "client", "agent", "cookie"]), json_values
    )
)
def test_any_json_object_parses_or_gives_a_reason(obj: dict[str, object]) -> None:
    result = JSON(json.dumps(obj))
    assert isinstance(result, (LogRecord, str))
    if isinstance(result, LogRecord):
        assert result.target.startswith("/") and (result.duration_ms is None or result.duration_ms >= 0)


segments = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_.~%"),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["GET", "POST", "DELETE", "PATCH"]),
    st.lists(segments, min_size=0, max_size=5),
    st.integers(min_value=100, max_value=599),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=400 * 86400),
)
def test_well_formed_lines_read_back_exactly(
    method: str, parts: list[str], status: int, micros: int, offset: int
) -> None:
    target = "/" + "/".join(parts)
    hit = Hit(T0 + offset, method, target, status=status, seconds=micros / 1e6)
    record = TEXT(combined_line(hit))
    assert isinstance(record, LogRecord)
    assert (record.method, record.target, record.status, record.time_s) == (method, target, status, T0 + offset)
    assert record.duration_ms == pytest.approx(round(micros / 1e6, 3) * 1000.0)


def test_progress_is_reported_as_the_reading_goes(tmp_path: Path) -> None:
    count = logs.PROGRESS_EVERY + 1000
    path = write_log(tmp_path / "a.log", [combined_line(Hit(T0 + i // 1000, "GET", "/")) for i in range(count)])
    parser = make_parser("auto", [path], {}, None, SessionKey("ip-ua"))
    seen: list[tuple[int, int]] = []
    counts = ReadCounts()
    for _ in read_records([path], parser, counts, lambda c: seen.append((c.lines, c.bytes_read))):
        pass
    assert [lines for lines, _ in seen[:2]] == [logs.EARLY_CHECK_LINES, logs.PROGRESS_EVERY]
    assert 0 < seen[0][1] < seen[1][1] < path.stat().st_size
    assert seen[-1] == (count, path.stat().st_size) and counts.bytes_total == path.stat().st_size


def zeros_gzip(path: Path, mebibytes: int, *, before: Sequence[str] = (), after: Sequence[str] = ()) -> Path:
    """A gzip bomb: ``mebibytes`` MiB of zero bytes (one line with no break) in a small file,
    between the lines ``before`` and ``after``."""
    chunk = bytes(1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as file:
        file.write("".join(line + "\n" for line in before).encode())
        for _ in range(mebibytes):
            file.write(chunk)
        file.write(("\n" if after else "").encode() + "".join(line + "\n" for line in after).encode())
    return path


def test_a_gzip_of_zeros_is_refused_as_no_text_log_without_reading_it_whole(tmp_path: Path) -> None:
    bomb = zeros_gzip(tmp_path / "zeros.gz", 64)
    assert bomb.stat().st_size < 1 << 20
    started = time.monotonic()
    with pytest.raises(InvalidInput) as error:
        read_all([bomb])
    assert "not a text log" in error.value.message and "line break" in error.value.message
    assert error.value.hint
    assert time.monotonic() - started < 5  # the first MiB tells; 64 MiB are never unpacked


def test_a_line_past_the_limit_is_counted_unreadable_and_skipped(tmp_path: Path) -> None:
    good = [combined_line(Hit(T0 + i, "GET", "/")) for i in range(20)]
    long = '1.2.3.4 - - [01/Mar/2024:10:00:00 +0000] "GET /' + "a" * logs.MAX_LINE_LENGTH + ' HTTP/1.1" 200 1'
    for path in (
        write_log(tmp_path / "a.log", good[:5] + [long] + good[5:]),
        write_log(tmp_path / "a.log.gz", good[:5] + [long] + good[5:], gzipped=True),
    ):
        records, counts, _ = read_all([path])
        assert len(records) == 20 and counts.lines == 21 and counts.bad == 1
        assert [(bad.line, bad.reason) for bad in counts.bad_samples] == [(6, "longer than 65,536 characters")]
        assert counts.bad_samples[0].text.startswith("1.2.3.4") and len(counts.bad_samples[0].text) <= 160
    # A line at the limit is read as any other.
    edge = '1.2.3.4 - - [01/Mar/2024:10:00:00 +0000] "GET /x HTTP/1.1" 200 1 "-" "'
    edge += "b" * (logs.MAX_LINE_LENGTH - len(edge) - 1) + '"'
    assert len(edge) == logs.MAX_LINE_LENGTH
    records, counts, _ = read_all([write_log(tmp_path / "edge.log", [edge, *good])])
    assert counts.bad == 0 and len(records) == 21


def test_a_long_line_is_never_held_whole_in_memory(tmp_path: Path) -> None:
    # 64 MiB of zeros between readable lines, read by a process allowed 48 MiB more address
    # space than it has after its imports: a line held whole would not fit.
    good = [combined_line(Hit(T0 + i, "GET", "/")) for i in range(10)]
    bomb = zeros_gzip(tmp_path / "inside.gz", 64, before=good, after=good)
    script = textwrap.dedent(f"""\
        import resource
        from pathlib import Path
        from horde.profile.logs import ReadCounts, SessionKey, make_parser, read_records
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + (48 << 20), resource.RLIM_INFINITY))
        path = Path({str(bomb)!r})
        counts = ReadCounts()
        parser = make_parser("auto", [path], {{}}, None, SessionKey("ip-ua"))
        records = sum(1 for _ in read_records([path], parser, counts))
        print(records, counts.bad, counts.lines)
        """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["20", "1", "21"]
