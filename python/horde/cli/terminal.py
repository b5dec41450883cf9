"""Where the ``horde`` commands write: ``stdout`` for what a command answers, ``stderr`` for the
``error:`` and ``hint:`` lines. Off a terminal (CI logs, pipes) rich would wrap at 80 columns;
lines there are long and whole."""

from __future__ import annotations

from rich.console import Console

stdout = Console() if Console().is_terminal else Console(width=160)
stderr = Console(stderr=True) if Console(stderr=True).is_terminal else Console(stderr=True, width=160)
