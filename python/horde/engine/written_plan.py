"""Writing a plan Horde generated (``horde profile``, ``horde import``): the plan and the files it
reads land together, and only once both the plan layer and the engine accept the plan.

The plan goes first to a temporary file beside its path (made as any file is, under a name no
one else takes), is loaded and checked from there (its relative feeder paths read from the
folder it will live in), and is then renamed over the path. A plan that fails its check is not
left on disk, nor are its files or the folders made for them: an older plan at the path stays
as it was.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from horde.engine.run import checked_plan_json
from horde.errors import InvalidInput, PlanInvalid, Problem
from horde.plan.loader import load_plan_file


def write_checked_plan(
    path: Path,
    text: str,
    files: Mapping[Path, str],
    *,
    flag: str,
    source: str | None = None,
    accept: Callable[[Problem], bool] | None = None,
) -> list[Path]:
    """Writes ``text`` at ``path`` and ``files`` (path → text) beside it, checked on both sides;
    the files written. ``flag`` is the option that named ``path`` (for the hint when it cannot
    be written), ``source`` what the plan was made from, if said when it is refused, and
    ``accept`` the problems a written plan may keep (the parts left to the user to give)."""
    written: list[Path] = []
    made: list[Path] = []
    temporary: Path | None = None
    try:
        try:
            made.extend(_make_folder(path.parent))
            for file, content in files.items():
                made.extend(_make_folder(file.parent))
                written.append(file)
                file.write_text(content, encoding="utf-8")
            temporary = path.parent / f".{path.stem}.{uuid.uuid4().hex[:12]}{path.suffix or '.yaml'}"
            with temporary.open("x", encoding="utf-8") as out:
                out.write(text)
        except OSError as error:
            raise InvalidInput(
                f"cannot write the plan to {path}: {error.strerror or error}", hint=f"give a writable path with {flag}"
            ) from None
        try:
            loaded = load_plan_file(temporary)
            checked_plan_json(loaded.plan, locate=loaded.located, source=str(path))
        except PlanInvalid as error:
            if accept is None or not all(accept(problem) for problem in error.problems):
                # Told at the plan's own name: the temporary file's means nothing to the reader.
                raise PlanInvalid(
                    [Problem(p.location.replace(str(temporary), str(path)), p.message, p.hint) for p in error.problems],
                    source=f"{path} ({source}, not written)" if source else f"{path} (not written)",
                ) from None
        os.replace(temporary, path)
        temporary = None
        return written
    except BaseException:
        for file in written:
            file.unlink(missing_ok=True)
        for folder in reversed(made):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)


def _make_folder(folder: Path) -> list[Path]:
    """Makes ``folder`` and its missing parents; the topmost one made (to remove), if any."""
    if folder.exists():
        return []
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    folder.mkdir(parents=True)
    return [missing]
