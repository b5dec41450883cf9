"""horde.engine.target: the built-in target started in-process, and as `horde target`."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from conftest import HORDE_BIN, _default_sigint, free_tcp_port, wait_for_port
from horde.engine import target
from horde.errors import InvalidInput


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read(), time.monotonic() - started
    except urllib.error.HTTPError as error:
        return error.code, error.read(), time.monotonic() - started


def test_endpoints_give_known_answers(builtin_target: Any) -> None:
    port = builtin_target.port
    assert port > 0
    status, _, _ = get(port, "/")
    assert status == 200
    status, body, elapsed = get(port, "/delay/100")
    assert status == 200 and body == b"ok\n"
    assert 0.1 <= elapsed < 1.0
    assert get(port, "/status/503")[0] == 503
    assert get(port, "/status/204")[0] == 204
    status, body, _ = get(port, "/bytes/1000")
    assert status == 200 and len(body) == 1000
    assert get(port, "/nope")[0] == 404
    assert get(port, "/delay/abc")[0] == 400


def test_a_stall_holds_later_requests(builtin_target: Any) -> None:
    port = builtin_target.port
    started = time.monotonic()
    status, _, elapsed = get(port, "/stall/300")
    assert status == 200 and elapsed < 0.25  # stall control answers at once
    status, _, elapsed = get(port, "/")
    # The stall ends 300 ms after it arrived, which was after `started`.
    assert status == 200 and time.monotonic() - started >= 0.3


def test_start_and_stop_free_the_port() -> None:
    handle = target.start(port=0)
    port = handle.port
    assert get(port, "/")[0] == 200
    handle.stop()
    handle.stop()  # twice is harmless
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_capacity_model_serves_one_request_per_worker_at_a_time() -> None:
    handle = target.start(port=0, workers=1, service_ms=100)
    try:
        status, _, elapsed = get(handle.port, "/")
        assert status == 200 and 0.09 <= elapsed < 0.6
    finally:
        handle.stop()


def test_a_busy_port_is_invalid_input_with_a_hint(builtin_target: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        target.start(port=builtin_target.port)
    assert caught.value.exit_code == 2
    assert "cannot start" in caught.value.message
    assert caught.value.hint is not None and "--port" in caught.value.hint


def test_half_a_capacity_model_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        target.start(port=0, workers=2)


def test_horde_target_command_serves_until_interrupted() -> None:
    port = free_tcp_port()
    proc = subprocess.Popen(
        [str(HORDE_BIN), "target", "--port", str(port), "--workers", "4", "--service-ms", "10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    try:
        wait_for_port(port)
        assert get(port, "/")[0] == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, err
    assert f"listening on http://127.0.0.1:{port}" in out
    assert "400 req/s max" in out
    assert "target stopped" in out


def test_horde_target_refuses_half_a_capacity_model() -> None:
    result = subprocess.run(
        [str(HORDE_BIN), "target", "--port", "0", "--workers", "3"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "error: --workers and --service-ms go together" in result.stderr
    assert "hint:" in result.stderr
