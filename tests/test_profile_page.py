"""`horde profile --html --plan`'s page shows the plan's judgments, read in a real headless
browser (Debian's chromium, tests/cdp.py) from pages the real command wrote for logs of a known
truth (tests/profile_truth.py): what was left out with its shares, the sizing with Little's law's
inputs (VUs = rate × (mean + think)), the client kinds found and how well they separate, and what
the user must supply. And the plan marks a credential to supply where the log shows the server
asked for one (401 or 403 on an endpoint): `horde validate` names it, exit 2, until it is filled.

Every figure is checked against the generator's truth, never against what the code computed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cdp import Browser
from conftest import HordeCli
from horde.errors import ExitCode
from horde.profile import PlanOptions, ProfileOptions, build_profile, render_page, write_plan
from profile_logs import T0, Hit, combined_line, write_log
from profile_truth import write_kinds_log, write_truth_log

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"

#: The page's tables as data: each row's data-endpoint (or data-scenario, data-part) and its
#: cells by data-field, as the browser has them laid out; and whether each section is shown.
READ_PAGE = """(() => {
  const rows = (id, key) => Object.fromEntries([...document.querySelectorAll('#' + id + ' tbody tr')].map(row => [
    row.dataset[key], Object.fromEntries([...row.querySelectorAll('[data-field]')].map(cell => [cell.dataset.field, cell.textContent.trim()]))]));
  const fields = id => Object.fromEntries([...document.querySelectorAll('#' + id + ' [data-field]')].map(cell => [cell.dataset.field, cell.textContent.trim()]));
  const shown = id => { const element = document.getElementById(id); return !!element && element.offsetHeight > 0; };
  return {
    left_out: rows('left-out', 'endpoint'), little: fields('little'), kinds_found: fields('kinds-found'),
    kinds: rows('kinds', 'scenario'), to_supply: [...document.querySelectorAll('#to-supply tbody tr')].map(row => [row.dataset.endpoint || null, row.dataset.part]),
    text: Object.fromEntries(['left-out-total', 'rate-derivation', 'little', 'kinds-found', 'to-supply-total'].map(id => [id, document.getElementById(id)?.textContent.replace(/\\s+/g, ' ').trim()])),
    shown: Object.fromEntries(['left-out', 'little', 'intensity', 'kinds-found', 'kinds', 'to-supply', 'plan-notes'].map(id => [id, shown(id)])),
  };
})()"""


def profiled(horde_cli: HordeCli, log: Path, name: str, *flags: str) -> tuple[Path, Path]:
    """(plan, page) that `horde profile LOG --plan --html` wrote."""
    plan, page = log.parent / f"{name}.yaml", log.parent / f"{name}.html"
    done = horde_cli.run("profile", str(log), "--plan", str(plan), "--html", str(page), *flags)
    assert done.returncode == 0, done.stdout + done.stderr
    return plan, page


def read_page(browser: Browser, page: Path, screenshot: str) -> dict[str, Any]:
    browser.open(page.resolve().as_uri())
    browser.wait_for(
        "document.querySelector('#rate-chart .main-svg') !== null", timeout_s=30, what="the charts to draw"
    )
    browser.screenshot(ARTIFACTS / screenshot)
    found: dict[str, Any] = browser.evaluate(READ_PAGE)
    assert browser.errors() == []
    return found


def plan_steps(plan: Path) -> dict[str, dict[str, Any]]:
    """The written plan's steps by name, read as data (a plan with parts to supply does not load)."""
    data = YAML(typ="safe").load(plan.read_text())
    return {step["name"]: step for branch in data["scenarios"][0]["steps"][0]["branches"] for step in branch["steps"]}


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_the_page_shows_the_plans_judgments_in_a_browser(horde_cli: HordeCli, tmp_path: Path) -> None:
    truth = write_truth_log(tmp_path / "access.log")
    plan, page = profiled(horde_cli, truth.path, "plan", "--model", "users", "--peak", "hour")
    kinds_truth = write_kinds_log(tmp_path / "kinds.log")
    _, kinds_page = profiled(
        horde_cli, tmp_path / "kinds.log", "kinds", "--model", "users", "--cover", "100", "--min-share", "0"
    )
    with Browser(tmp_path / "browser") as browser:
        shown = read_page(browser, page, "profile-judgments.png")
        kinds = read_page(browser, kinds_page, "profile-kinds.png")

    assert all(
        shown["shown"][section]
        for section in ("left-out", "little", "intensity", "kinds-found", "to-supply", "plan-notes")
    )
    # Left out: exactly the two endpoints under 1 % by count and by time, with the truth's shares.
    assert set(shown["left_out"]) == {"GET /api/ping", "GET /static/site.css"}
    for name, row in shown["left_out"].items():
        assert int(row["requests"]) == truth.counts[name]
        assert number(row["share_by_count"]) == pytest.approx(100 * truth.share_by_count(name), abs=0.005)
        assert number(row["share_by_time"]) == pytest.approx(100 * truth.share_by_time(name), abs=0.006)
    left_count = sum(truth.share_by_count(name) for name in shown["left_out"])
    left_time = sum(truth.share_by_time(name) for name in shown["left_out"])
    assert (
        f"{100 * left_count:.2f} % of the requests, {100 * left_time:.2f} % of the server's time"
        in shown["text"]["left-out-total"]
    )

    # Sizing: the kept endpoints' requests in the peak hour / 3,600 s × 1.2, and Little's law on
    # the mean of that hour's mix and the truth's think time.
    kept = [name for name in truth.counts if name not in shown["left_out"]]
    in_peak = {name: count for name, count in truth.in_minutes(truth.peak_hour_first(), 60).items() if name in kept}
    rate = sum(in_peak.values()) / 3600 * 1.2
    mean_ms, think_ms = truth.mean_ms_of(in_peak), truth.mean_think_ms()
    little = shown["little"]
    assert number(little["rate_per_s"]) == pytest.approx(rate, abs=2e-3)
    assert number(little["mean_ms"]) == pytest.approx(mean_ms, rel=0.01)  # 1 %: the histogram's buckets
    assert number(little["think_ms"]) == pytest.approx(think_ms, rel=0.01)
    assert int(little["vus"]) == math.ceil(rate * (mean_ms + think_ms) / 1000) > 1
    assert "VUs = rate × (mean time + think time)" in shown["text"]["little"]
    assert f"{truth.peak_hour_per_s:.3f}".rstrip("0") in shown["text"]["rate-derivation"]
    assert (
        f"× the kept endpoints' {100 * sum(in_peak.values()) / 5000:.1f} % of its requests × 1.2 (headroom 20 %)"
        in shown["text"]["rate-derivation"]
    )
    assert (
        "each endpoint's rate from its own requests in that window (from 2024-03-01T11:00:00Z)"
        in shown["text"]["rate-derivation"]
    )
    assert "as users looping request and think" in shown["text"]["rate-derivation"]

    # Its clients are of one kind: told so, with the sessions it looked at.
    assert shown["kinds_found"]["kinds"] == "One" and shown["kinds"] == {}
    assert "one scenario for every client" in shown["text"]["kinds-found"]
    assert "No split was scored: every split's groups lay under 0.2 apart" in shown["text"]["kinds-found"]

    # What the user must supply: the bodies of the two kept POST endpoints, no credential (no 401 or 403).
    assert shown["to_supply"] == [["POST /api/orders", "body"], ["POST /api/refunds/{id}", "body"]]
    assert f"horde validate {plan}" in shown["text"]["to-supply-total"]

    # Three kinds of client (devices, users, admins), each with its sessions, length, pace and top endpoint.
    assert kinds["shown"]["kinds"] and kinds["kinds_found"]["kinds"] == "3"
    assert number(kinds["kinds_found"]["silhouette"]) > 0.8 and "clearly apart" in kinds["text"]["kinds-found"]
    assert int(kinds["kinds_found"]["sessions"]) == sum(kind.sessions for kind in kinds_truth.values())
    total = sum(kind.requests for kind in kinds_truth.values())
    tops = {"devices": "POST /api/telemetry", "users": "GET /api/items/{id}", "admins": "GET /api/reports/{id}"}
    for (scenario, row), name in zip(kinds["kinds"].items(), ("devices", "users", "admins")):
        kind = kinds_truth[name]
        assert int(row["sessions"]) == kind.sessions
        assert number(row["requests_per_session"]) == pytest.approx(kind.requests / kind.sessions)
        assert number(row["session_think_ms"]) == pytest.approx(kind.think_ms, abs=1e-3)
        assert number(row["share_of_requests"]) == pytest.approx(100 * kind.requests / total, abs=0.005)
        assert int(row["vus"]) == math.ceil(
            number(row["rate_per_s"]) * (number(row["mean_ms"]) + kind.think_ms) / 1000 - 1e-9
        )
        assert row["top"].startswith(tops[name]), (scenario, row["top"])
    assert "per client kind" in kinds["text"]["little"]
    assert int(kinds["little"]["vus"]) == sum(int(row["vus"]) for row in kinds["kinds"].values())


def guarded_log(path: Path, refused: dict[int, int]) -> Path:
    """120 requests: GET /api/items/{id} (60, public), GET /api/account (40, ``refused`` of them
    answered with each status, the rest 200) and POST /api/cart (20, of which none refused)."""
    statuses = [status for status, count in refused.items() for _ in range(count)]
    hits = []
    for i in range(120):
        if i % 3 == 0:
            hits.append(Hit(T0 + i, "GET", "/api/account", status=statuses.pop() if statuses and i % 2 == 0 else 200))
        elif i % 6 == 1:
            hits.append(Hit(T0 + i, "POST", "/api/cart", status=201))
        else:
            hits.append(Hit(T0 + i, "GET", f"/api/items/{i}"))
    assert not statuses
    return write_log(path, [combined_line(hit) for hit in hits])


def test_a_guarded_endpoint_gets_a_credential_to_supply_until_it_is_filled(horde_cli: HordeCli, tmp_path: Path) -> None:
    log = guarded_log(tmp_path / "access.log", {401: 6, 403: 2})
    plan, page = profiled(
        horde_cli, log, "plan", "--min-share", "0", "--cover", "100", "--json", str(tmp_path / "profile.json")
    )
    steps = plan_steps(plan)
    # Only the endpoint the server refused carries the marked header.
    assert [name for name, step in steps.items() if "headers" in step] == ["GET /api/account"]
    assert re.fullmatch(r'\{\{ supply\(".*"\) \}\}', steps["GET /api/account"]["headers"]["Authorization"])
    text = plan.read_text()
    assert "#   GET /api/account: 8 of 40\n" in text

    checked = horde_cli.run("validate", str(plan))
    told = checked.stdout + checked.stderr
    assert checked.returncode == ExitCode.INVALID_INPUT, told
    line = next(number for number, row in enumerate(text.splitlines(), start=1) if "Authorization:" in row)
    assert f"{plan}:{line}" in told
    assert (
        "to supply: the credential of GET /api/account: the log holds none, and the server asked for one "
        "(6 with 401 and 2 with 403 of its 40 requests)" in told
    )
    assert told.count("to supply:") == 2  # the credential, and POST /api/cart's body

    data = json.loads((tmp_path / "profile.json").read_text())
    assert [(row["endpoint"], row["part"]) for row in data["plan"]["to_supply"]] == [
        ("GET /api/account", "header Authorization"),
        ("POST /api/cart", "body"),
    ]
    assert data["plan"]["to_supply"][0]["refused"] == {"401": 6, "403": 2}
    html = page.read_text()
    assert 'data-part="header Authorization" data-endpoint="GET /api/account"' in html

    # Filled in as a user would (a parameter keeps the token out of the file), the plan is valid.
    filled = re.sub(r"Authorization: .*", "Authorization: Bearer {{ params.token }}", text)
    filled = re.sub(r"body: .*supply\(.*", "body: '{}'", filled).replace(
        "version: 1\n", "version: 1\nparameters:\n  token: none\n"
    )
    plan.write_text(filled)
    checked = horde_cli.run("validate", str(plan), "-p", "token=abc")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_log_without_signs_of_a_credential_marks_none(horde_cli: HordeCli, tmp_path: Path) -> None:
    log = guarded_log(tmp_path / "access.log", {})
    plan, page = profiled(horde_cli, log, "plan", "--min-share", "0", "--cover", "100")
    text = plan.read_text()
    steps = plan_steps(plan)
    assert len(steps) == 3 and not any("headers" in step for step in steps.values())
    assert "Authorization" not in text and "credential of" not in text
    assert text.count("{{ supply(") == 1  # POST /api/cart's body only
    assert 'data-part="header Authorization"' not in page.read_text()


def test_the_page_says_what_it_could_not_judge(tmp_path: Path) -> None:
    # A log without response times, a plan without client kinds looked for (--kinds off), all of
    # its endpoints kept, nothing to supply: each section says so rather than showing nothing.
    lines = [
        combined_line(Hit(T0 + i, "GET", f"/api/items/{i}", client=f"10.0.0.{i % 3}"), nginx_times=False)
        for i in range(50)
    ]
    profile = build_profile([write_log(tmp_path / "access.log", lines)], ProfileOptions())
    html = " ".join(render_page(profile, write_plan(profile, tmp_path / "plan.yaml", PlanOptions())).split())
    assert "Nothing: every endpoint of the log is in the plan." in html
    # 50 requests in the first minute: 50/60 req/s, × 1.2 = 1 req/s.
    assert (
        "Rate: 0.833 req/s in the peak minute × the kept endpoints' 100.0 % of its requests × 1.2 (headroom 20 %) = <b>1 req/s</b>"
        in html
    )
    assert "No sizing by Little's law: the log has no response times and the open model no think time." in html
    assert "Not looked for (<code>--kinds off</code>)" in html
    assert "Nothing marked: no kept endpoint carries a body or answered 401 or 403" in html
