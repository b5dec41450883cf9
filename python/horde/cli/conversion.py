"""``horde import``: a plan another load tool wrote (a JMeter test plan, a yandex-tank or pandora
config with its ammo, a HAR recording) converted to a Horde plan.

``register(app)`` adds the command. It sends no load: it reads the source, writes the plan (YAML,
commented: :mod:`horde.conversion.plan_yaml`) once both sides have checked it, and prints what
became of each element of the source, with its location. Exit codes: 0 when everything was
converted or approximated (an approximation is said in the plan and the table), 19
(``IMPORT_INCOMPLETE``) when the plan was written but some of the source could not be converted,
2 for a source that cannot be read, an unknown format, or an ``--out`` that exists (without
``--force``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from horde.cli.arguments import HordeCommand
from horde.cli.terminal import stdout
from horde.conversion import Conversion, Outcome
from horde.conversion.detect import FORMAT_HINT, FORMATS, detect_format
from horde.conversion.plan_yaml import plan_yaml
from horde.errors import ExitCode, InvalidInput

#: How much of the file tells its format.
_HEAD_BYTES = 65536
_STYLES = {Outcome.CONVERTED: "green", Outcome.APPROXIMATED: "yellow", Outcome.NOT_CONVERTED: "bold red"}


def register(app: typer.Typer) -> None:
    """Add ``import`` to ``app`` (a second call does nothing)."""
    if any(info.name == "import" for info in app.registered_commands):
        return
    app.command(
        "import",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde import load.yaml --out plan.yaml\n\n  horde import shop.har --keep-static"
        "\n\n  horde import test.jmx --format jmeter --out test.yaml --force"
        "\n\nExit codes: 0 converted (approximations included), 19 written with parts not converted, 2 bad input."
        " See docs/import.md.",
    )(import_plan)


def import_plan(
    source: Annotated[Path, typer.Argument(metavar="FILE", help="a .jmx, a tank/pandora config, or a .har")],
    source_format: Annotated[
        str | None, typer.Option("--format", help=f"{', '.join(FORMATS)}; told by the file when not given")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="the plan file to write (default: FILE's name + .horde.yaml)")
    ] = None,
    keep_static: Annotated[
        bool, typer.Option("--keep-static", help="HAR: keep images, CSS, scripts and fonts as steps")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="overwrite --out when it exists")] = False,
) -> int:
    """Convert a JMeter plan, a yandex-tank/pandora config or a HAR recording to a Horde plan."""
    conversion = convert(source, source_format, keep_static=keep_static)
    path = out if out is not None else source.with_name(f"{source.stem}.horde.yaml")
    write(conversion, path, force=force)
    _print(conversion, path)
    return ExitCode.IMPORT_INCOMPLETE if conversion.of(Outcome.NOT_CONVERTED) else ExitCode.OK


def convert(source: Path, source_format: str | None, *, keep_static: bool = False) -> Conversion:
    """The conversion of ``source`` by the converter of its format (told or detected)."""
    if source_format is not None and source_format not in FORMATS:
        raise InvalidInput(f"--format: '{source_format}' is not a format Horde imports", hint=FORMAT_HINT)
    try:
        with source.open("rb") as file:
            head = file.read(_HEAD_BYTES)
    except OSError as error:
        raise InvalidInput(
            f"cannot read {source}: {error.strerror or error}", hint="give the path of the file to import"
        ) from None
    chosen = source_format or detect_format(source, head)
    if chosen == "tank":
        from horde.conversion.tank import convert_tank

        return convert_tank(source)
    if chosen == "har":
        from horde.conversion.har import convert_har

        return convert_har(source, keep_static=keep_static)
    try:
        from horde.conversion.jmeter import convert_jmx
    except ImportError:
        raise InvalidInput(
            f"{source}: JMeter import is not available in this build", hint="convert a tank config or a HAR for now"
        ) from None
    return convert_jmx(source)


def write(conversion: Conversion, path: Path, *, force: bool = False) -> None:
    """Writes the plan and the files it reads, once both sides have checked it: first to a
    temporary file beside ``path``, then renamed over it; a plan that fails its check is not left
    on disk, nor are its files."""
    from horde.engine.written_plan import write_checked_plan

    if path.is_dir():
        raise InvalidInput(f"--out: {path} is a directory", hint="give a file path, e.g. --out plan.yaml")
    if path.exists() and not force:
        raise InvalidInput(f"--out: {path} exists", hint="give another --out, or --force to overwrite it")
    conversion = _feeders_read_from(conversion, path.parent)
    write_checked_plan(
        path,
        plan_yaml(conversion, path.name),
        {path.parent / name: text for name, text in conversion.files.items()},
        flag="--out",
        source=f"converted from {conversion.source}",
    )


def _feeders_read_from(conversion: Conversion, folder: Path) -> Conversion:
    """The conversion with its plan's relative feeder paths made relative to ``folder``, where the
    plan is written: a converter names the source's own files (a JMeter plan's CSV) relative to
    the source, and a plan's relative paths are read from the plan's folder. The files the
    conversion writes itself go beside the plan and keep their names."""
    plan = copy.deepcopy(conversion.plan)
    source_folder = conversion.source.resolve().parent
    for scenario in plan.get("scenarios") or []:
        for feeder in scenario.get("feeders") or []:
            name = feeder.get("path")
            if not isinstance(name, str) or Path(name).is_absolute() or name in conversion.files:
                continue
            feeder["path"] = os.path.relpath(source_folder / name, folder.resolve())
    return dataclasses.replace(conversion, plan=plan)


def _print(conversion: Conversion, path: Path) -> None:
    table = Table(title=f"{conversion.source} ({conversion.source_format}) → {path}", title_justify="left")
    for column in ("outcome", "location", "element", "what the plan does"):
        table.add_column(column, overflow="fold")
    order = {Outcome.NOT_CONVERTED: 0, Outcome.APPROXIMATED: 1, Outcome.CONVERTED: 2}
    for finding in sorted(conversion.findings, key=lambda finding: order[finding.outcome]):
        style = _STYLES[finding.outcome]
        # Text, not markup: a source's text ("[Host: example.org]") is shown as it is.
        table.add_row(
            Text(str(finding.outcome), style), Text(finding.location), Text(finding.element), Text(finding.note)
        )
    stdout.print(table)
    counts = ", ".join(f"{len(conversion.of(outcome))} {outcome}" for outcome in Outcome)
    stdout.print(f"wrote {path}: {counts}", markup=False, highlight=False)
    for name in conversion.files:
        stdout.print(f"wrote {path.parent / name}", markup=False, highlight=False)
    if conversion.of(Outcome.NOT_CONVERTED):
        stdout.print(
            f"some of the source was not converted: see the NOT CONVERTED comments in {path} (exit code "
            f"{int(ExitCode.IMPORT_INCOMPLETE)})",
            markup=False,
            highlight=False,
        )
