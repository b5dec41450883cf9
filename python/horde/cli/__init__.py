"""The ``horde`` command: the application and its entry point ``main`` (:mod:`~horde.cli.app`),
and its commands, a module per family: :mod:`~horde.cli.run` (run, try, sight, scale, retarget),
:mod:`~horde.cli.runs` (runs, show), :mod:`~horde.cli.target` (target), :mod:`~horde.cli.plan`
(schema, validate), :mod:`~horde.cli.results` (report, export, compare, trend),
:mod:`~horde.cli.web` (ui), :mod:`~horde.cli.init` (init), :mod:`~horde.cli.profile` (profile).
How flags are read (:mod:`~horde.cli.arguments`), where output goes (:mod:`~horde.cli.terminal`),
and what a person or a CI server reads: :mod:`~horde.cli.console` (the summary, verdicts,
comparisons), :mod:`~horde.cli.exchanges` (recorded exchanges for ``--debug`` and ``try``),
:mod:`~horde.cli.junit`. Nothing below this layer imports it."""

from horde.cli.app import app, main

__all__ = ["app", "main"]
