"""A self-signed HTTPS target: without --insecure every request fails as `tls`, the summary
quotes rustls' reason and says what to do; with --insecure (target.insecure) every request is
answered. A target whose certificate a private CA signed is verified with target.ca_file."""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import HordeCli
from horde.errors import ExitCode


class _Ok(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _serve(cert: Path, key: Path) -> tuple[http.server.ThreadingHTTPServer, threading.Thread]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def private_ca_https(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """An HTTPS server whose certificate (for IP 127.0.0.1) a private CA signed; yields its port
    and the CA's certificate."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make certificates (.ci/run installs it)")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60, cwd=tmp_path)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=Horde test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    )
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"
    )
    (tmp_path / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        "-out",
        "server.pem",
    )
    server, _ = _serve(tmp_path / "server.pem", tmp_path / "server.key")
    try:
        yield server.server_address[1], tmp_path / "ca.pem"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def self_signed_https(tmp_path: Path) -> Iterator[int]:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make a self-signed certificate (.ci/run installs it)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server, _ = _serve(cert, key)
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_self_signed_target_fails_as_tls_with_a_hint_and_insecure_gets_through(
    horde_cli: HordeCli, self_signed_https: int
) -> None:
    url = f"https://127.0.0.1:{self_signed_https}/"
    refused = horde_cli.run("run", "--url", url, "--vus", "1", "--duration", "1s", "--summary-json", "refused.json")
    assert refused.returncode == ExitCode.NO_CONNECTION, refused.stderr
    summary = json.loads((horde_cli.tmp_path / "refused.json").read_text())
    assert summary["requests"] > 0 and summary["errors_by_kind"] == {"tls": summary["requests"]}
    assert "tls: the TLS handshake failed" in refused.stdout and "--insecure" in refused.stdout
    assert "target.ca_file" in refused.stdout
    [detail] = summary["error_details"]
    assert "invalid peer certificate" in detail["message"], detail

    accepted = horde_cli.run(
        "run", "--url", url, "--vus", "1", "--duration", "1s", "--insecure", "--summary-json", "accepted.json"
    )
    assert accepted.returncode == ExitCode.OK, accepted.stderr
    summary = json.loads((horde_cli.tmp_path / "accepted.json").read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0


def test_a_private_ca_is_trusted_with_ca_file(horde_cli: HordeCli, private_ca_https: tuple[int, Path]) -> None:
    port, ca = private_ca_https
    plan = {
        "version": 1,
        "name": "private-ca",
        "target": {"base_url": f"https://127.0.0.1:{port}", "ca_file": ca.name},
        "scenarios": [
            {
                "name": "s",
                "steps": [{"name": "home", "method": "GET", "path": "/"}],
                "workload": {"type": "closed", "start_vus": 1, "stages": [{"duration_s": 1, "vus": 1}]},
            }
        ],
    }
    # The CA file is found beside the plan, wherever the command runs.
    (ca.parent / "plan.json").write_text(json.dumps(plan))
    trusted = horde_cli.run("run", str(ca.parent / "plan.json"), "--summary-json", "trusted.json")
    assert trusted.returncode == ExitCode.OK, trusted.stdout + trusted.stderr
    summary = json.loads((horde_cli.tmp_path / "trusted.json").read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0

    del plan["target"]["ca_file"]  # type: ignore[attr-defined]
    (ca.parent / "plan.json").write_text(json.dumps(plan))
    untrusted = horde_cli.run("run", str(ca.parent / "plan.json"), "--summary-json", "untrusted.json")
    assert untrusted.returncode == ExitCode.NO_CONNECTION
    details = json.loads((horde_cli.tmp_path / "untrusted.json").read_text())["error_details"]
    assert "UnknownIssuer" in details[0]["message"], details
