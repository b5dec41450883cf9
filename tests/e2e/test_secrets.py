"""Secrets stay secret: one marker value planted through every way a credential enters a run
(an environment parameter, ``-p``, headers of the common credential names, a query string, a JSON
body, ``--url`` with ``-H`` and ``--body``) is found in none of what Horde writes: the terminal,
the store's files, ``--summary-json``, JUnit, ``horde show``/``runs``/``export``, the HTML report,
the dashboard's API and the Prometheus endpoint while the run goes."""

from __future__ import annotations

import json
import stat
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from conftest import HordeCli, free_tcp_port
from horde.errors import ExitCode
from horde.web import create_app
from report_pages import readable

MARKER = "s3cr3t-M4RK3R-42"
#: Planted only as a one-time credential of a query string (``?code=``, OAuth's callback), and
#: only inside an object under a credential-named body field: each found by its own rule.
CODE_MARKER = "c0de-M4RK3R-43"
NESTED_MARKER = "n3st-M4RK3R-44"
MARKERS = (MARKER, CODE_MARKER, NESTED_MARKER)


def _scrape_while_running(horde_cli: HordeCli, args: list[str], port: int) -> tuple[str, str, str, int]:
    running = horde_cli.popen(*args, "--prometheus", str(port))
    scraped = ""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "horde_requests_total{" not in scraped:
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    scraped = response.read().decode()
            except OSError:
                continue
        out, err = running.communicate(timeout=30)
    finally:
        running.kill()
    return out, err, scraped, running.returncode


def _store_bytes(horde_cli: HordeCli) -> bytes:
    """The store's files as they lie on disk (the database, its WAL and shared memory)."""
    return b"".join(path.read_bytes() for path in horde_cli.store_path.parent.iterdir() if path.is_file())


def test_a_planted_secret_reaches_no_output(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = horde_cli.tmp_path / "plan.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: secrets
        parameters: {{upstream: "none", api_token: "none"}}
        target:
          base_url: "http://127.0.0.1:{builtin_target.port}"
          headers: {{Authorization: "Bearer {{{{ params.api_token }}}}", X-Trace: "{{{{ params.upstream }}}}"}}
        scenarios:
          - name: api
            steps:
              - name: get
                method: GET
                path: "/?access_token={{{{ params.upstream }}}}&page=2&code={CODE_MARKER}"
                headers: {{X-Auth: "{MARKER}", Api_Key: "{MARKER}", X-Access-Key: "{MARKER}", Cookie: "sid={MARKER}"}}
              - name: post
                method: POST
                path: /
                json: {{user: me, password: "{{{{ params.api_token }}}}", credentials: {{user: "{NESTED_MARKER}", keys: ["{NESTED_MARKER}"]}}}}
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 3, vus: 2}}]}}
        thresholds: ["errors < 50%"]
        """)
    )
    # The environment (how a CI job passes a token) and -p, for parameters of any name.
    horde_cli.env["HORDE_PARAM_UPSTREAM"] = MARKER
    summary, junit = horde_cli.tmp_path / "summary.json", horde_cli.tmp_path / "junit.xml"
    out, err, scraped, code = _scrape_while_running(
        horde_cli,
        ["run", str(plan), "-p", f"api_token={MARKER}", "--summary-json", str(summary), "--junit", str(junit)],
        free_tcp_port(),
    )
    assert code == ExitCode.OK, err
    quick = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{builtin_target.port}/?access_token={MARKER}&code={CODE_MARKER}",
        "-H",
        f"X-Api-Key: {MARKER}",
        "--body",
        json.dumps({"password": MARKER, "credentials": {"a": [NESTED_MARKER]}}),
        "--method",
        "POST",
        "--vus",
        "1",
        "--duration",
        "1s",
    )
    assert quick.returncode == ExitCode.OK, quick.stderr
    run_id = json.loads(summary.read_text())["run_id"]

    written: dict[str, str] = {
        "run stdout": out,
        "run stderr": err,
        "prometheus": scraped,
        "summary json": summary.read_text(),
        "junit": junit.read_text(),
        "--url stdout": quick.stdout,
        "--url stderr": quick.stderr,
    }
    for command in (
        ["show", run_id],
        ["show", run_id, "--json"],
        ["show", "last", "--json"],
        ["runs", "--json"],
        ["export", run_id, "--format", "json"],
        ["export", "last", "--format", "csv"],
    ):
        result = horde_cli.run(*command)
        assert result.returncode == ExitCode.OK, result.stderr
        written[" ".join(command)] = result.stdout + result.stderr
    report = horde_cli.tmp_path / "report.html"
    assert horde_cli.run("report", run_id, "last", "-o", str(report)).returncode == ExitCode.OK
    written["report"] = readable(report.read_text())
    with TestClient(create_app(horde_cli.store_url, token=None), base_url="http://127.0.0.1:8089") as client:
        for path in ("/api/runs", f"/api/runs/{run_id}", "/api/runs/last"):
            response = client.get(path)
            assert response.status_code == 200, path
            written[path] = response.text

    leaks = [(marker, where) for where, text in written.items() for marker in MARKERS if marker in text]
    assert leaks == [], f"the secret was written to: {leaks}"
    assert not [marker for marker in MARKERS if marker.encode() in _store_bytes(horde_cli)]
    # What was redacted is still said to be there: the plan as run keeps its shape.
    stored_plan = json.loads(horde_cli.run("show", run_id, "--json").stdout)
    assert "<redacted>" in written["report"] and "access_token=" in written["report"] and "code=" in written["report"]
    assert stored_plan["requests"] > 0
    # The requests carried the real values (the target saw them): every one was answered.
    assert json.loads(summary.read_text())["errors"] == 0


def test_a_new_store_is_readable_by_its_owner_only(horde_cli: HordeCli, builtin_target: Any) -> None:
    result = horde_cli.run("run", "--url", f"http://127.0.0.1:{builtin_target.port}/", "--vus", "1", "--duration", "1s")
    assert result.returncode == ExitCode.OK, result.stderr
    mode = stat.S_IMODE(horde_cli.store_path.stat().st_mode)
    assert mode & 0o077 == 0, oct(mode)


def test_a_name_holding_a_secret_is_refused_before_any_load(horde_cli: HordeCli, builtin_target: Any) -> None:
    plan = horde_cli.tmp_path / "named.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: named
        parameters: {{api_token: "none"}}
        target: {{base_url: "http://127.0.0.1:{builtin_target.port}"}}
        scenarios:
          - name: api
            steps: [{{name: "get {{{{ params.api_token }}}}", method: GET, path: /}}]
            workload: {{type: closed, start_vus: 1, stages: [{{duration_s: 1, vus: 1}}]}}
        """)
    )
    result = horde_cli.run("run", str(plan), "-p", f"api_token={MARKER}")
    assert result.returncode == ExitCode.INVALID_INPUT, result.stderr
    assert "a name holds a secret value" in result.stderr and "hint:" in result.stderr
    assert MARKER not in result.stdout + result.stderr
    assert json.loads(horde_cli.run("runs", "--json").stdout) == []
    assert not any(
        MARKER.encode() in path.read_bytes() for path in Path(horde_cli.store_path).parent.glob("*") if path.is_file()
    )


def test_a_planted_secret_reaches_no_printed_exchange(horde_cli: HordeCli, builtin_target: Any) -> None:
    # `--debug N` and `horde try` print requests whole: every way the marker enters a request
    # (a header named like a credential, one fed by a parameter set through the environment, a
    # query field, a JSON body field, a cookie, a templated path) is redacted in what they print.
    plan = horde_cli.tmp_path / "debug.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: debug-secrets
        parameters: {{upstream: "none", api_token: "none"}}
        target:
          base_url: "http://127.0.0.1:{builtin_target.port}"
          headers: {{Authorization: "Bearer {{{{ params.api_token }}}}", X-Trace: "{{{{ params.upstream }}}}"}}
        scenarios:
          - name: api
            steps:
              - name: get
                method: GET
                path: "/?access_token={MARKER}&up={{{{ params.upstream }}}}&page=2"
                headers: {{X-Auth: "{MARKER}", Cookie: "sid={MARKER}"}}
              - name: post
                method: POST
                path: /
                json: {{user: me, password: "{{{{ params.api_token }}}}"}}
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 1, vus: 2}}]}}
        """)
    )
    horde_cli.env["HORDE_PARAM_UPSTREAM"] = MARKER
    debug = horde_cli.run("run", str(plan), "-p", f"api_token={MARKER}", "--debug", "3")
    assert debug.returncode == ExitCode.OK, debug.stderr
    tried = horde_cli.run("try", str(plan), "-p", f"api_token={MARKER}")
    assert tried.returncode == ExitCode.OK, tried.stdout + tried.stderr
    for result in (debug, tried):
        assert "> Authorization: <redacted>" in result.stdout and "access_token=<redacted>" in result.stdout
        assert '"password":"<redacted>"' in result.stdout
        assert MARKER not in result.stdout + result.stderr
    assert MARKER.encode() not in _store_bytes(horde_cli)


#: Planted as a cookie's value through a parameter of no credential name (``-p c=...``), and as
#: the passwords of a feeder's rows, which the target echoes back in its answers.
COOKIE_MARKER = "c00k1e-M4RK3R-45"
FED_MARKERS = ("f3d-M4RK3R-46", "f3d-M4RK3R-47")


def test_a_cookie_from_a_parameter_and_an_echoed_feeder_password_reach_no_output(
    horde_cli: HordeCli, builtin_target: Any
) -> None:
    # The target answers `/delay/X` and `/status/X` with a 400 whose body quotes X: a failed
    # check's details and a failed status's details both carry the password it was sent.
    (horde_cli.tmp_path / "users.csv").write_text(
        "login,password\n" + "".join(f"user{index},{password}\n" for index, password in enumerate(FED_MARKERS))
    )
    plan = horde_cli.tmp_path / "echo.yaml"
    plan.write_text(
        textwrap.dedent(f"""\
        version: 1
        name: echoed
        parameters: {{c: "none"}}
        target:
          base_url: "http://127.0.0.1:{builtin_target.port}"
          headers: {{Cookie: "sid={{{{ params.c }}}}; lang=en"}}
        scenarios:
          - name: login
            feeders: [{{name: users, path: users.csv}}]
            steps:
              - name: checked
                method: GET
                path: "/delay/{{{{ users.password }}}}"
                checks: [{{type: body_contains, text: "welcome"}}]
              - name: answered
                method: GET
                path: "/status/{{{{ users.password }}}}"
            workload: {{type: closed, start_vus: 2, stages: [{{duration_s: 2, vus: 2}}]}}
        """)
    )
    summary = horde_cli.tmp_path / "summary.json"
    args = ["run", str(plan), "-p", f"c={COOKIE_MARKER}", "--summary-json", str(summary)]
    out, err, scraped, code = _scrape_while_running(horde_cli, args, free_tcp_port())
    assert code == ExitCode.OK, err
    run_id = json.loads(summary.read_text())["run_id"]
    written: dict[str, str] = {
        "run stdout": out,
        "run stderr": err,
        "prometheus": scraped,
        "summary json": summary.read_text(),
    }
    for command in (
        ["show", run_id],
        ["show", run_id, "--json"],
        ["runs", "--json"],
        ["export", run_id, "--format", "json"],
        ["export", run_id, "--format", "csv"],
    ):
        result = horde_cli.run(*command)
        assert result.returncode == ExitCode.OK, result.stderr
        written[" ".join(command)] = result.stdout + result.stderr
    report = horde_cli.tmp_path / "report.html"
    assert horde_cli.run("report", run_id, "-o", str(report)).returncode == ExitCode.OK
    written["report"] = readable(report.read_text())
    with TestClient(create_app(horde_cli.store_url, token=None), base_url="http://127.0.0.1:8089") as client:
        for path in ("/api/runs", f"/api/runs/{run_id}", f"/api/runs/{run_id}/events", f"/runs/{run_id}"):
            response = client.get(path)
            assert response.status_code == 200, path
            written[path] = response.text

    markers = (COOKIE_MARKER, *FED_MARKERS)
    leaks = [(marker, where) for where, text in written.items() for marker in markers if marker in text]
    assert leaks == [], f"the secret was written to: {leaks}"
    assert not [marker for marker in markers if marker.encode() in _store_bytes(horde_cli)]
    # The target did echo the passwords: the details say so, with the password redacted.
    shown = written["summary json"]
    assert "`<redacted>` is not a number of milliseconds" in shown
    assert "`<redacted>` is not a status code" in shown
