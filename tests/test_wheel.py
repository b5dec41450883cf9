"""`make wheel`'s wheel installs and runs where there is no Rust (issue 41).

The wheel is built as `make wheel` builds it (`make wheel-build`: the `wheel` profile and this
venv's interpreter, so it reuses `make setup`'s build and costs only the packing), then installed
with pip into a fresh virtual environment whose PATH is that venv's bin/, /usr/bin and /bin alone
(no cargo, no rustc: checked), its dependencies from PyPI as wheels only (nothing compiled). From
there, in a folder outside the repository, the quick start's plan (examples/quickstart) runs against
`horde target` started from the same venv: it exits 0, `horde show --json` reads the stored run back
with the plan's steps, and `horde report` writes a page under 1 MB (the templates and the vendored
plotly.js travelled in the wheel). About 20 s: the venv 3 s, pip 7 s (the dependencies
downloaded from PyPI: HOME is the test's own, so no cache), the run 3 s. Runs in CI (`make test`);
it needs PyPI for the dependencies.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import horde
from conftest import free_tcp_port, wait_for_port

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(900)]


def test_the_wheel_installs_without_rust_and_runs_the_quick_start(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # The Makefile's own recipe (the cargo build it starts needs the toolchain; installing does not).
    built = subprocess.run(
        ["make", "-s", "--no-print-directory", "wheel-build", f"DIST={dist}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    # abi3 for 3.11 and later, a manylinux policy maturin checked against the engine's symbols.
    assert re.fullmatch(
        rf"horde-{re.escape(horde.__version__)}-cp311-abi3-manylinux_2_\d+_{platform.machine()}\.whl", wheel.name
    ), wheel.name

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    path = f"{venv / 'bin'}:/usr/bin:/bin"
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None, (
        "a Rust toolchain is on /usr/bin or /bin: this test must install where there is none"
    )
    home = tmp_path / "home"
    home.mkdir()
    # Only how this machine reaches PyPI (pip's settings, a proxy, its CA bundle) comes along.
    reach = {
        key: value
        for key, value in os.environ.items()
        if key.startswith("PIP_")
        or key.lower().endswith("_proxy")
        or key in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    }
    env = {
        **reach,
        "PATH": path,
        "HOME": str(home),
        "LC_ALL": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    started = time.monotonic()
    installed = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:", str(wheel)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    print(f"pip install {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB): {time.monotonic() - started:.1f} s")

    # The engine and the package are the venv's, not this repository's.
    where = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import horde, horde._engine; print(horde.__file__); print(horde._engine.__file__)",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert all(Path(line).is_relative_to(venv) for line in where.stdout.split()), where.stdout

    plan = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", plan)
    store = tmp_path / "runs.sqlite"
    horde_bin = str(venv / "bin/horde")
    port = free_tcp_port()
    target = subprocess.Popen(
        [horde_bin, "target", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        run = subprocess.run(
            [
                horde_bin,
                "run",
                str(plan),
                "--base-url",
                f"http://127.0.0.1:{port}",
                "--duration",
                "3s",
                "--store",
                str(store),
                "--summary-json",
                str(tmp_path / "summary.json"),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        target.terminate()
        target.wait(timeout=10)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    run_id = json.loads((tmp_path / "summary.json").read_text())["run_id"]

    shown = subprocess.run(
        [horde_bin, "show", "last", "--json", "--store", str(store)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert summary["run_id"] == run_id and summary["status"] == "finished"
    # The quick start's two steps (examples/quickstart/plan.yaml), each answered by the target.
    assert sorted(summary["steps"]) == ["home", "item"]
    assert all(step["requests"] > 0 and step["errors"] == 0 for step in summary["steps"].values())

    page = tmp_path / "report.html"
    reported = subprocess.run(
        [horde_bin, "report", run_id, "-o", str(page), "--store", str(store)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert reported.returncode == 0, reported.stderr
    assert 0 < page.stat().st_size < 1_000_000
