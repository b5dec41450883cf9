"""HTTP/2 end to end: `horde run` of a plan with ``http_version: 2`` against `horde target`."""

from __future__ import annotations

import json
from typing import Any

from conftest import HordeCli


def test_horde_run_over_h2c_multiplexes_one_pooled_connection(horde_cli: HordeCli, target_process: Any) -> None:
    port = target_process()
    plan = horde_cli.tmp_path / "plan.yaml"
    # http_version unquoted, as a user writes it: YAML reads it as the number 2.
    plan.write_text(f"""
version: 1
name: h2
target:
  base_url: http://127.0.0.1:{port}
  http_version: 2
  connections: {{pool: 1}}
scenarios:
  - name: s
    steps:
      - {{name: slow, method: GET, path: /delay/20, checks: [{{type: status, in: [200]}}]}}
    workload: {{type: closed, start_vus: 20, stages: [{{duration_s: 2, vus: 20}}]}}
""")
    result = horde_cli.run("run", str(plan), "--workers", "1", "--summary-json", "summary.json", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((horde_cli.tmp_path / "summary.json").read_text())
    # Every request answered, all over the pool's one connection.
    assert summary["connections_opened"] == 1, summary
    assert summary["errors"] == 0 and summary["errors_by_kind"] == {}, summary
    assert summary["checks"][0]["failures"] == 0, summary
    # 20 VUs waiting 20 ms each: one HTTP/1.1 connection would carry at most 50 requests/s
    # (100 in 2 s); multiplexed, about 1,000/s.
    assert summary["requests"] > 500, summary
