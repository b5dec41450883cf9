"""``horde import`` as a user runs it: the plan written and validated, the table of findings, the
documented exit codes (0, 19 with parts not converted, 2 for bad input), --out kept unless --force."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from conftest import HordeCli
from horde.cli.conversion import convert, write
from horde.engine import written_plan
from horde.errors import ExitCode, PlanInvalid, Problem

FIXTURES = Path(__file__).parent / "fixtures" / "import"


def _clean_error(result: object, code: int) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)  # type: ignore[attr-defined]
    assert "Traceback" not in result.stdout + result.stderr  # type: ignore[attr-defined]
    assert re.search(r"^error:", result.stderr, re.MULTILINE) and "hint:" in result.stderr  # type: ignore[attr-defined]


def test_a_complete_conversion_exits_0_and_the_plan_validates(horde_cli: HordeCli, tmp_path: Path) -> None:
    for name in ("instances.yaml", "raw.ammo"):
        shutil.copy(FIXTURES / "tank" / name, tmp_path / name)
    result = horde_cli.run("import", "instances.yaml", "--out", "plan.yaml")
    assert result.returncode == ExitCode.OK, result.stderr
    assert "wrote plan.yaml: 7 converted, 1 approximated, 0 not converted" in result.stdout
    assert "raw.ammo:7" in result.stdout
    validated = horde_cli.run("validate", "plan.yaml")
    assert validated.returncode == 0, validated.stderr


def test_parts_not_converted_exit_19_and_are_marked_in_the_plan(horde_cli: HordeCli, tmp_path: Path) -> None:
    result = horde_cli.run("import", str(FIXTURES / "har" / "shop.har"), "--out", "shop.yaml")
    assert result.returncode == ExitCode.IMPORT_INCOMPLETE == 19, result.stderr
    text = (tmp_path / "shop.yaml").read_text()
    assert "# NOT CONVERTED (shop.har: log.entries[3])" in text
    assert text.count("# APPROXIMATED (shop.har: log.entries[") == 3
    assert horde_cli.run("validate", "shop.yaml").returncode == 0
    again = horde_cli.run("import", str(FIXTURES / "har" / "shop.har"), "--out", "shop.yaml")
    _clean_error(again, ExitCode.INVALID_INPUT)
    assert "--force" in again.stderr
    assert horde_cli.run("import", str(FIXTURES / "har" / "shop.har"), "--out", "shop.yaml", "--force").returncode == 19


def test_bad_input_is_located_with_a_hint_and_exit_2(horde_cli: HordeCli, tmp_path: Path) -> None:
    (tmp_path / "load.yaml").write_text(
        "phantom:\n  address: 127.0.0.1:80\n  load_profile: {load_type: rps, schedule: 'const(5, 10s)'}\n  ammofile: missing.ammo\n"
    )
    result = horde_cli.run("import", "load.yaml")
    _clean_error(result, ExitCode.INVALID_INPUT)
    assert "load.yaml:4: cannot read the ammo" in result.stderr
    (tmp_path / "notes.txt").write_text("hello\n")
    _clean_error(horde_cli.run("import", "notes.txt"), ExitCode.INVALID_INPUT)
    _clean_error(horde_cli.run("import", "notes.txt", "--format", "lotus"), ExitCode.INVALID_INPUT)
    (tmp_path / "broken.har").write_text('{"log": {"entries": [{"request": {}}]}}')
    broken = horde_cli.run("import", "broken.har")
    _clean_error(broken, ExitCode.INVALID_INPUT)
    assert "broken.har: log.entries[0]: no request.method" in broken.stderr
    assert not (tmp_path / "broken.horde.yaml").exists()


def test_a_jmx_goes_to_the_jmeter_converter(horde_cli: HordeCli, tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "jmeter" / "arrivals.jmx", tmp_path / "test.plan")
    result = horde_cli.run("import", "test.plan", "--out", "plan.yaml")  # told by its content
    assert result.returncode in (ExitCode.OK, ExitCode.IMPORT_INCOMPLETE), result.stderr
    assert "(jmeter)" in result.stdout and (tmp_path / "plan.yaml").exists()


def test_a_plan_written_elsewhere_reads_the_sources_files_from_there(horde_cli: HordeCli, tmp_path: Path) -> None:
    # A JMeter plan's CSV Data Set names its file relative to the .jmx; the plan is written in
    # another folder, so its feeder's path is made relative to that folder.
    for name in ("game.jmx", "players.csv"):
        shutil.copy(FIXTURES / "jmeter" / name, tmp_path / name)
    (tmp_path / "plans").mkdir()
    result = horde_cli.run("import", "game.jmx", "--out", "plans/game.yaml")
    assert result.returncode in (ExitCode.OK, ExitCode.IMPORT_INCOMPLETE), result.stderr
    assert "path: ../players.csv" in (tmp_path / "plans" / "game.yaml").read_text()
    validated = horde_cli.run("validate", "plans/game.yaml")
    assert validated.returncode == 0, validated.stderr


def test_a_plan_refused_on_writing_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A converter's mistake the engine refuses: no plan, no temporary file, none of its files nor
    # the folders made for them; an older plan at the path stays as it was.
    def refused(plan: object, *, locate: object = None, source: str = "") -> str:
        raise PlanInvalid([Problem("scenarios[0].steps[0]", "refused by the engine")], source=source)

    monkeypatch.setattr(written_plan, "checked_plan_json", refused)
    for name in ("instances.yaml", "raw.ammo"):
        shutil.copy(FIXTURES / "tank" / name, tmp_path / name)
    conversion = dataclasses.replace(convert(tmp_path / "instances.yaml", None), files={"data/requests.csv": "GET,/\n"})
    with pytest.raises(PlanInvalid) as refusal:
        write(conversion, tmp_path / "new" / "deeper" / "plan.yaml")
    assert "plan.yaml (converted from" in refusal.value.source and "not written" in refusal.value.source
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "plan.yaml").write_text("# an older plan\n")
    with pytest.raises(PlanInvalid):
        write(conversion, tmp_path / "old" / "plan.yaml", force=True)
    assert [path.name for path in (tmp_path / "old").iterdir()] == ["plan.yaml"]
    assert (tmp_path / "old" / "plan.yaml").read_text() == "# an older plan\n"
