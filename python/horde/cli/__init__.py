"""The ``horde`` command: the app and its commands (:mod:`~horde.cli.app` for run, sight, scale,
retarget, runs, show, target, schema and validate; :mod:`~horde.cli.results` for report, export,
compare and trend; :mod:`~horde.cli.web` for ui), how arguments are read
(:mod:`~horde.cli.arguments`), and what a person or a CI server reads at the end
(:mod:`~horde.cli.console`, :mod:`~horde.cli.junit`). Nothing below this layer imports it."""

from horde.cli.app import app, main

__all__ = ["app", "main"]
