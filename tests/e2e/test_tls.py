"""A self-signed HTTPS target: without --insecure every request fails as `tls` and the summary
says what to do; with --insecure (target.insecure) every request is answered."""

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


@pytest.fixture
def self_signed_https(tmp_path: Path) -> Iterator[int]:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make a self-signed certificate (.ci/run installs it)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_self_signed_target_fails_as_tls_with_a_hint_and_insecure_gets_through(horde_cli: HordeCli,
                                                                                 self_signed_https: int) -> None:
    url = f"https://127.0.0.1:{self_signed_https}/"
    refused = horde_cli.run("run", "--url", url, "--vus", "1", "--duration", "1s", "--summary-json", "refused.json")
    assert refused.returncode == ExitCode.OK, refused.stderr
    summary = json.loads((horde_cli.tmp_path / "refused.json").read_text())
    assert summary["requests"] > 0 and summary["errors_by_kind"] == {"tls": summary["requests"]}
    assert "tls: the TLS handshake failed" in refused.stdout and "--insecure" in refused.stdout

    accepted = horde_cli.run("run", "--url", url, "--vus", "1", "--duration", "1s", "--insecure",
                             "--summary-json", "accepted.json")
    assert accepted.returncode == ExitCode.OK, accepted.stderr
    summary = json.loads((horde_cli.tmp_path / "accepted.json").read_text())
    assert summary["requests"] > 0 and summary["errors"] == 0
