"""``horde init``: a starter plan where a user wants one, for those who installed Horde and have
no copy of its repository's examples. The plan is the quickstart's (``examples/quickstart`` is
the same file), commented line by line, pointed at the user's target."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional
from urllib.parse import urlsplit

import typer
from rich.console import Console

from horde.cli.arguments import HordeCommand
from horde.errors import ExitCode, InvalidInput

#: The starter plan, shipped in the package.
STARTER = Path(__file__).resolve().parent / "starter" / "plan.yaml"
_BASE_URL = re.compile(r"^(  base_url: ).*$", re.M)


def register(app: typer.Typer) -> None:
    app.command(
        "init",
        cls=HordeCommand,
        epilog=("Examples:\n\n  horde init\n\n  horde init load-tests --url https://staging.example.com"),
    )(init)


def init(
    folder: Annotated[Path, typer.Argument(metavar="FOLDER", help="where to write plan.yaml (made if missing)")] = Path(
        "."
    ),
    url: Annotated[
        Optional[str], typer.Option("--url", metavar="URL", help="the target's base URL (default: the built-in target)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace a plan.yaml already there")] = False,
) -> int:
    """Write a starter plan (plan.yaml), commented line by line, to run and change."""
    text = STARTER.read_text(encoding="utf-8")
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInput(
                f"--url: '{url}' is not an http(s) URL with a host",
                hint="for example --url https://staging.example.com",
            )
        text = _BASE_URL.sub(lambda match: match.group(1) + url.rstrip("/"), text, count=1)
    target = folder / "plan.yaml"
    if target.exists() and not force:
        raise InvalidInput(f"{target} exists already", hint="give another folder, or --force to replace it")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as error:
        raise InvalidInput(
            f"cannot write {target}: {error.strerror or error}", hint="choose a folder you may write to"
        ) from None
    out = Console()
    out.print(f"wrote {target}", markup=False, highlight=False, soft_wrap=True)
    shown = str(folder)
    steps = [f"horde validate {shown}"]
    if url is None:
        steps.append("horde target --port 8080   # the built-in target, in another terminal")
    steps.append(f"horde run {shown}")
    out.print("next:\n" + "\n".join(f"  {step}" for step in steps), markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK
