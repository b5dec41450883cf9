"""The `horde` command on bad input: documented exit codes, `error:`/`hint:` lines, never a
traceback, and no load sent. Also `horde schema` / `horde validate`, and the modules' doctests."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from conftest import HORDE_BIN, HordeCli, free_tcp_port
from horde.errors import ClusterUnavailable, ExitCode

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart"

BAD_PLAN = """\
version: 1
name: bad
target:
  base_url: http://127.0.0.1:8080
  colour: blue
scenarios:
  - name: browse
    steps:
      - name: home
        method: GET
        path: /
    workload:
      type: closed
      stages:
        - duration_s: -1
          vus: 2
"""


class Result:
    """What a `horde` command gave: exit code and output (like subprocess.CompletedProcess)."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def horde_main(horde_cli: HordeCli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """`horde.cli.main(argv)` in this process (no interpreter start-up: fast), with the same
    store and working directory as ``horde_cli``."""
    from horde.cli import main

    monkeypatch.setenv("HORDE_STORE", horde_cli.env["HORDE_STORE"])
    monkeypatch.chdir(horde_cli.tmp_path)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def assert_clean_error(result: Any, code: int) -> None:
    """The documented exit code, an `error:` line, and no traceback anywhere."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    assert re.search(r"^error:|^Error:", result.stderr, re.MULTILINE), result.stderr


@pytest.fixture
def silent_listener() -> Iterator[tuple[int, socket.socket]]:
    """A port on 127.0.0.1 that accepts connections into its backlog and never answers: after
    a command ran, any connection it opened can be seen with accept()."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    try:
        yield sock.getsockname()[1], sock
    finally:
        sock.close()


def assert_no_connection(sock: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        connection, _ = sock.accept()
        connection.close()


# -- plans with problems -------------------------------------------------------------------------


def test_a_bad_yaml_plan_lists_every_problem_with_file_line_and_hint(horde_cli: HordeCli) -> None:
    (horde_cli.tmp_path / "plan.yaml").write_text(BAD_PLAN)
    result = horde_cli.run("run", "plan.yaml")
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    err = result.stderr.splitlines()
    assert err[0] == "error: the plan in plan.yaml has 2 problems"
    expected = {
        "  plan.yaml:5: target.colour: unknown key 'colour'",
        "  plan.yaml:15: scenarios[0].workload.stages[0].duration_s: must be greater than 0",
    }
    for start in expected:
        [index] = [i for i, line in enumerate(err) if line.startswith(start)]
        assert err[index + 1].strip().startswith("hint: "), err
    assert err[-1].startswith("hint: ")
    assert result.stdout == ""  # nothing ran


def test_validate_a_bad_plan(horde_cli: HordeCli, horde_main: Any) -> None:
    (horde_cli.tmp_path / "plan.yaml").write_text(BAD_PLAN)
    result = horde_main("validate", "plan.yaml")
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "plan.yaml:5: target.colour" in result.stderr
    assert "plan.yaml:15: scenarios[0].workload.stages[0].duration_s" in result.stderr


def test_validate_the_quickstart(horde_main: Any) -> None:
    result = horde_main("validate", str(QUICKSTART))
    assert result.returncode == 0, result.stderr
    assert "valid — 1 scenario(s), 2 step(s), 20 s of stages" in result.stdout


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["--vus", "5", "--rate", "5"],
            "error: --vus and --rate cannot be used together",
            "hint: --vus for a closed model",
        ),
        (
            ["--duration", "abc"],
            "error: --duration: 'abc' is not a duration",
            "hint: write seconds (30), or with units",
        ),
        (["--duration", "0"], "error: --duration must be more than 0", "hint: for example --duration 30s"),
        (
            ["--ramp-up", "9s", "--duration", "3s"],
            "error: --ramp-up (9 s) must be shorter than the duration (3 s)",
            "hint:",
        ),
        (["--workers", "0"], "error: --workers must be at least 1 (got 0)", None),
        (["-H", "nocolon"], "error: -H: 'nocolon' is not a header", "hint: write it as 'Name: value'"),
        (["--tag", "[/x]"], "error: --tag: '[/x]' is not key=value", "hint: for example --tag build=1234"),
        (["-X", "FETCH"], "scenarios[0].steps[0].method: 'FETCH' is not a method Horde sends", "hint: use one of: GET"),
    ],
)
def test_bad_flags_with_url(
    horde_cli: HordeCli,
    horde_main: Any,
    silent_listener: tuple[int, socket.socket],
    args: list[str],
    message: str,
    hint: str | None,
) -> None:
    port, sock = silent_listener
    result = horde_main("run", "--url", f"http://127.0.0.1:{port}/", *args)
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert message in result.stderr
    if hint is not None:
        assert hint in result.stderr
    assert_no_connection(sock)
    assert not horde_cli.store_path.exists()  # refused before the store was even opened


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--url", "ftp://x"], "error: --url: 'ftp://x' is not an http(s) URL with a host"),
        (["run", "--url", "http://[::1"], "error: --url: 'http://[::1' is not an http(s) URL with a host"),
        (["run", "missing.yaml"], "missing.yaml: no such file or directory"),
        (["run"], "error: no plan given"),
        (["run", "plan.yaml", "--url", "http://127.0.0.1:1/"], "error: give either a plan file or --url, not both"),
        (["show", "nope"], "error: no run matches 'nope'"),
        (["show", "last"], "error: there are no runs in the store"),
        (["run", "--url", "http://127.0.0.1:1/", "--summary-json", "."], "error: --summary-json: . is a directory"),
    ],
)
def test_bad_arguments(horde_cli: HordeCli, horde_main: Any, args: list[str], message: str) -> None:
    (horde_cli.tmp_path / "plan.yaml").write_text(BAD_PLAN)
    result = horde_main(*args)
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert message in result.stderr
    assert "hint:" in result.stderr


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["run", "--url", "http://127.0.0.1:1/", "--duration", "2", "sec"],
            "error: 'sec' after --duration 2 is a stray argument, taken for the plan file: a duration is one word",
            "hint: write --duration 2s (durations are written 2s, 500ms, 1m, 1h30m)",
        ),
        (
            ["run", "--duration", "1.5", "minutes", "--url", "http://127.0.0.1:1/"],
            "'minutes' after --duration 1.5",
            "hint: write --duration 1.5m",
        ),
        (
            ["sight", "--url", "http://127.0.0.1:1/", "--duration", "10", "s"],
            "'s' after --duration 10 is a stray",
            "--duration 10s",
        ),
        (
            ["run", "--url", "http://127.0.0.1:1/", "extra"],
            "error: 'extra' is a stray argument beside --url",
            "hint: --url needs no plan file",
        ),
    ],
)
def test_a_stray_word_taken_for_the_plan_is_named(
    horde_cli: HordeCli, horde_main: Any, args: list[str], message: str, hint: str
) -> None:
    # `--duration 2 sec`: the shell gives "sec" apart, and the command line takes it for PLAN.
    result = horde_main(*args)
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert message in result.stderr and hint in result.stderr
    assert "not both" not in result.stderr
    assert not horde_cli.store_path.exists()


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["run", str(QUICKSTART), "--duration", "2", "sec"],
            "error: 'sec' after --duration 2 is a stray argument: a duration is one word",
            "hint: write --duration 2s",
        ),
        (["sight", str(QUICKSTART), "--duration", "10", "seconds"], "'seconds' after --duration 10", "--duration 10s"),
        (
            ["run", str(QUICKSTART), "extra"],
            "error: 'extra' is a stray argument: the command takes one plan",
            "hint: quote a value that holds spaces",
        ),
    ],
)
def test_a_stray_word_beside_a_plan_file_is_named(
    horde_cli: HordeCli, horde_main: Any, args: list[str], message: str, hint: str
) -> None:
    # With a plan file, the word is an extra argument (not PLAN): named too, nothing run.
    result = horde_main(*args)
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert message in result.stderr and hint in result.stderr, result.stderr
    assert "unexpected extra argument" not in result.stderr
    assert not horde_cli.store_path.exists()


@pytest.mark.parametrize(
    "args",
    [["run", "--vus", "abc", "--url", "http://127.0.0.1:1/"], ["nosuchcommand"], ["show"], ["runs", "--limit", "x"]],
)
def test_usage_errors_exit_2(horde_main: Any, args: list[str]) -> None:
    result = horde_main(*args)
    assert_clean_error(result, ExitCode.INVALID_INPUT)


def test_an_unknown_flag_exits_2_from_the_command(horde_cli: HordeCli) -> None:
    result = horde_cli.run("run", "--bogus")
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "No such option: --bogus" in result.stderr


def test_store_unreachable_exits_3_without_the_password_and_without_load(
    horde_cli: HordeCli, silent_listener: tuple[int, socket.socket]
) -> None:
    port, sock = silent_listener
    started = time.monotonic()
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{port}/",
        "--vus",
        "2",
        "--duration",
        "30s",
        "--store",
        "postgresql://u:sekret@127.0.0.1:1/db",
        timeout=40,
    )
    assert time.monotonic() - started < 10  # the 30 s run never started
    assert_clean_error(result, ExitCode.STORE_UNAVAILABLE)
    output = result.stdout + result.stderr
    assert "sekret" not in output
    assert "cannot open the results store postgresql+psycopg://u:***@127.0.0.1:1/db" in result.stderr
    assert re.search(r"^hint: .*PostgreSQL", result.stderr, re.MULTILINE)
    assert "requests" not in output and "running for" not in output
    assert_no_connection(sock)


def test_an_unwritable_summary_json_after_the_run_is_a_clean_error(horde_cli: HordeCli) -> None:
    result = horde_cli.run(
        "run",
        "--url",
        f"http://127.0.0.1:{free_tcp_port()}/",
        "--vus",
        "1",
        "--duration",
        "0.5s",
        "--workers",
        "1",
        "--summary-json",
        "/proc/horde-nope/summary.json",
    )
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "error: cannot write --summary-json /proc/horde-nope/summary.json" in result.stderr
    [hint] = [line for line in result.stderr.splitlines() if line.startswith("hint: the run is stored")]
    run_id = hint.split("horde show ")[1].split()[0]
    assert horde_cli.run("show", run_id, "--json").returncode == 0


def test_store_unreachable_from_the_environment(horde_main: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HORDE_STORE", "/proc/horde-nope/runs.sqlite")
    result = horde_main("runs")
    assert_clean_error(result, ExitCode.STORE_UNAVAILABLE)
    assert "hint:" in result.stderr


def _as_a_user_who_may_not_write(read_only_file: Path) -> list[str]:
    """A command prefix under which ``read_only_file`` cannot be written: none for an ordinary
    user; for root (CI), setpriv without CAP_DAC_OVERRIDE, keeping CAP_DAC_READ_SEARCH so that
    the interpreter and the package still read; the test is skipped where that cannot be done."""
    if os.geteuid() != 0:
        return []
    prefix = ["setpriv", "--bounding-set", "-dac_override", "--inh-caps", "-dac_override"]
    probe = [sys.executable, "-c", f"import os, sys; sys.exit(os.access({str(read_only_file)!r}, os.W_OK))"]
    dropped = (
        shutil.which("setpriv") is not None
        and not subprocess.run([*prefix, *probe], capture_output=True, check=False).returncode
    )
    if not dropped:
        pytest.skip("root cannot drop CAP_DAC_OVERRIDE here (setpriv missing, or no CAP_SETPCAP)")
    return prefix


def _get_json(url: str, server: subprocess.Popen[str], *, within_s: float = 20.0) -> Any:
    """``url``'s JSON, once ``server`` listens (it must not have exited)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + within_s
    while True:
        if server.poll() is not None:
            _, err = server.communicate()
            raise AssertionError(f"the server exited {server.returncode}: {err}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError) as error:
            if isinstance(error, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_runs_and_show_read_a_store_this_user_may_only_read(horde_cli: HordeCli, tmp_path: Path) -> None:
    from horde.store import Store
    from synthetic import entry

    folder = tmp_path / "teammate"
    folder.mkdir()
    store_path = folder / "runs.sqlite"
    with Store.open(f"sqlite:///{store_path}") as store:
        run_id = store.create_run(plan={}, plan_name="shared", parameters={"workers": 1}, tags={"build": "7"})
        for second in (1, 2):
            store.add_snapshot(
                run_id,
                {
                    "second": second,
                    "elapsed_s": float(second),
                    "interval_s": 1.0,
                    "timestamp": 1763819000.0 + second,
                    "final": second == 2,
                    "steps": [entry("home", [1000, 2000, 3000])],
                    "active_vus": 1,
                    "busy_vus": 1,
                    "iterations": 3,
                    "dropped_arrivals": 0,
                    "connections_opened": 1,
                    "target_vus": 1,
                    "target_rate_per_s": None,
                    "cpu_percent": 5.0,
                    "timer_lateness_p99_ms": 0.1,
                },
            )
        store.finish_run(run_id, status="finished", summary=None)
    # Neither the file nor its folder is writable: SQLite cannot make its -wal and -shm files.
    store_path.chmod(0o444)
    folder.chmod(0o555)
    try:
        prefix = _as_a_user_who_may_not_write(store_path)

        def horde(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*prefix, str(HORDE_BIN), *args, "--store", str(store_path)],
                env=horde_cli.env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        listed = horde("runs", "--json")
        assert listed.returncode == ExitCode.OK, listed.stderr
        assert [row["run_id"] for row in json.loads(listed.stdout)] == [run_id]
        shown = horde("show", "last")
        assert shown.returncode == ExitCode.OK, shown.stderr
        assert run_id in shown.stdout and "home" in shown.stdout
        # The dashboard serves it too.
        ui_port = free_tcp_port()
        served = subprocess.Popen(
            [*prefix, str(HORDE_BIN), "ui", "--port", str(ui_port), "--store", str(store_path)],
            env=horde_cli.env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            listed_by_ui = _get_json(f"http://127.0.0.1:{ui_port}/api/runs", served)
            assert [row["run_id"] for row in listed_by_ui["runs"]] == [run_id], listed_by_ui
        finally:
            served.terminate()
            served.communicate(timeout=30)
        # Recording a run is refused at once, before the run starts, saying why.
        refused = horde("run", "--url", f"http://127.0.0.1:{free_tcp_port()}/", "--duration", "1s")
        assert_clean_error(refused, ExitCode.STORE_UNAVAILABLE)
        assert "running for" not in refused.stdout + refused.stderr
        assert "cannot record a run" in refused.stderr
        assert "hint: this user may only read the store" in refused.stderr
        assert sorted(path.name for path in folder.iterdir()) == ["runs.sqlite"]
    finally:
        folder.chmod(0o755)


def test_cluster_without_ray_exits_6_with_the_install_hint(
    horde_main: Any, monkeypatch: pytest.MonkeyPatch, silent_listener: tuple[int, socket.socket]
) -> None:
    port, sock = silent_listener
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    result = horde_main("run", "--url", f"http://127.0.0.1:{port}/", "--duration", "1s", "--cluster", "local")
    assert_clean_error(result, ExitCode.CLUSTER_UNAVAILABLE)
    assert "needs Ray, which is not installed" in result.stderr
    assert "hint: pip install 'horde[cluster]'" in result.stderr
    assert_no_connection(sock)
    assert ClusterUnavailable.exit_code == 6


def test_the_readme_documents_every_exit_code_and_no_other() -> None:
    section = (REPO / "README.md").read_text().split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    documented = [int(code) for code in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)]
    assert len(documented) == len(set(documented)), "a code is documented twice"
    # An IntEnum member sharing another's number is an alias: __members__ shows it, iteration not.
    assert len({int(code) for code in ExitCode.__members__.values()}) == len(ExitCode.__members__)
    assert sorted(documented) == sorted(int(code) for code in ExitCode), (
        f"in the code, not the README: {sorted(set(map(int, ExitCode)) - set(documented))}; "
        f"in the README, not the code: {sorted(set(documented) - set(map(int, ExitCode)))}"
    )


def test_a_port_in_use_for_the_target_is_invalid_input(
    horde_main: Any, silent_listener: tuple[int, socket.socket]
) -> None:
    port, _ = silent_listener
    result = horde_main("target", "--port", str(port))
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "hint: pick another --port" in result.stderr


def test_bad_service_times_for_the_target_are_invalid_input(horde_main: Any) -> None:
    result = horde_main("target", "--port", "0", "--workers", "4", "--service-ms", "10", "--service-times", "gamma")
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "'gamma' is not a distribution" in result.stderr and "hint: give fixed or exponential" in result.stderr
    result = horde_main("target", "--port", "0", "--service-times", "exponential")
    assert_clean_error(result, ExitCode.INVALID_INPUT)
    assert "hint: give --workers and --service-ms too" in result.stderr


# -- schema, version, help -----------------------------------------------------------------------


class SchemaError(AssertionError):
    pass


def check(instance: Any, schema: dict[str, Any], defs: dict[str, Any], where: str = "$") -> None:
    """A small JSON Schema (2020-12) checker for the keywords the plan's schema uses."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        check(instance, defs[name], defs, where)
    if "oneOf" in schema:
        passing = 0
        for option in schema["oneOf"]:
            try:
                check(instance, option, defs, where)
                passing += 1
            except SchemaError:
                pass
        if passing != 1:
            raise SchemaError(f"{where}: matches {passing} of oneOf")
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            try:
                check(instance, option, defs, where)
                break
            except SchemaError:
                pass
        else:
            raise SchemaError(f"{where}: matches none of anyOf")
    types: dict[str, type | tuple[type, ...]] = {
        "object": dict,
        "array": list,
        "string": str,
        "integer": int,
        "number": (int, float),
        "null": type(None),
        "boolean": bool,
    }
    if "type" in schema and not isinstance(instance, types[schema["type"]]):
        raise SchemaError(f"{where}: not {schema['type']}")
    if "const" in schema and instance != schema["const"]:
        raise SchemaError(f"{where}: not {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        raise SchemaError(f"{where}: not one of {schema['enum']}")
    if "minimum" in schema and instance < schema["minimum"]:
        raise SchemaError(f"{where}: below minimum")
    if "exclusiveMinimum" in schema and instance <= schema["exclusiveMinimum"]:
        raise SchemaError(f"{where}: not above exclusiveMinimum")
    if "minLength" in schema and len(instance) < schema["minLength"]:
        raise SchemaError(f"{where}: too short")
    if "minItems" in schema and len(instance) < schema["minItems"]:
        raise SchemaError(f"{where}: too few items")
    if isinstance(instance, dict):
        for key in schema.get("required", []):
            if key not in instance:
                raise SchemaError(f"{where}: missing {key}")
        properties = schema.get("properties", {})
        for key, value in instance.items():
            if key in properties:
                check(value, properties[key], defs, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                raise SchemaError(f"{where}: unknown key {key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                check(value, schema["additionalProperties"], defs, f"{where}.{key}")
    if isinstance(instance, list) and "items" in schema:
        for index, item in enumerate(instance):
            check(item, schema["items"], defs, f"{where}[{index}]")


def test_schema_is_a_json_schema_that_accepts_the_quickstart_and_refuses_bad_plans(horde_cli: HordeCli) -> None:
    result = horde_cli.run("schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["required"]) == {"version", "target", "scenarios"}
    defs = schema["$defs"]
    refs = re.findall(r'"\$ref": "#/\$defs/([^"]+)"', result.stdout)
    assert refs and set(refs) <= set(defs)
    quickstart = YAML(typ="safe").load((QUICKSTART / "plan.yaml").read_text())
    check(quickstart, schema, defs)
    for bad in (
        {**quickstart, "duration": 30},
        {**quickstart, "target": {**quickstart["target"], "colour": "blue"}},
        {**quickstart, "scenarios": []},
        {k: v for k, v in quickstart.items() if k != "target"},
    ):
        with pytest.raises(SchemaError):
            check(bad, schema, defs)


def test_version_and_help(horde_main: Any) -> None:
    result = horde_main("--version")
    assert result.returncode == 0 and result.stdout.strip() == "horde 0.1.0"
    result = horde_main("run", "--help")
    assert result.returncode == 0
    for flag in ("--url", "--vus", "--rate", "--duration", "--summary-json", "--store"):
        assert flag in result.stdout


def test_target_help_lists_every_route_the_target_serves(horde_main: Any) -> None:
    # The routes as the target's source declares them, so that a new one cannot go unlisted.
    source = REPO / "crates" / "horde-target" / "src"
    http = re.findall(r"^\s*/// `(/[^`]*)`$", (source / "routes.rs").read_text(), re.MULTILINE)
    game_source = (source / "game" / "routes.rs").read_text()
    game = [f"/game/{name}" for name in re.findall(r'^\s*"(\w+)" => Endpoint::', game_source, re.MULTILINE)]
    websocket = (source / "websocket.rs").read_text()
    ws = [f"/ws/{name}" for name in re.findall(r'Some\("(\w+)"\) => Ok\(WsRoute', websocket)]
    ws += [f"/ws/{name}/" for name in re.findall(r'Some\(\("(\w+)", \w+\)\)', websocket)]
    assert (len(http), len(game), len(ws)) == (5, 7, 3), (http, game, ws)  # the patterns still find them
    result = horde_main("target", "--help")
    assert result.returncode == ExitCode.OK
    text = " ".join(result.stdout.split())
    missing = [route for route in (*http, *game, *ws) if route not in text]
    assert missing == [], f"horde target --help does not list {missing}"


def test_unknown_port_is_free() -> None:
    # (free_tcp_port is what the tests use for a dead target.)
    port = free_tcp_port()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_init_writes_the_starter_plan_pointed_at_the_target(horde_main: Any, tmp_path: Path) -> None:
    folder = tmp_path / "load-tests"
    result = horde_main("init", str(folder), "--url", "https://staging.example.com/")
    assert result.returncode == ExitCode.OK, result.stderr
    plan = folder / "plan.yaml"
    assert "base_url: https://staging.example.com\n" in plan.read_text()
    assert "# The quickstart plan" in plan.read_text()  # the commented starter, as shipped
    assert f"horde run {folder}" in result.stdout
    assert horde_main("validate", str(folder)).returncode == ExitCode.OK
    again = horde_main("init", str(folder))
    assert again.returncode == ExitCode.INVALID_INPUT and "exists already" in again.stderr and "--force" in again.stderr
    assert horde_main("init", str(folder), "--force").returncode == ExitCode.OK
    assert "base_url: http://127.0.0.1:8080\n" in plan.read_text()
    bad = horde_main("init", str(tmp_path / "other"), "--url", "staging.example.com")
    assert bad.returncode == ExitCode.INVALID_INPUT and "hint:" in bad.stderr and not (tmp_path / "other").exists()
