"""The ``horde`` command: the Typer application, its commands registered family by family, and
``main``, its entry point.

Every user mistake ends as ``error: ...`` and ``hint: ...`` lines on stderr with a documented
exit code (``horde.errors.ExitCode``, table in the README); only a bug in Horde prints a
traceback.
"""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer
from rich.markup import escape

from horde import __version__
from horde.errors import ExitCode, HordeError, PlanInvalid
from horde.cli import conversion, init, link, plan, profile, results, run, runs, target, web
from horde.cli.terminal import stderr, stdout

app = typer.Typer(
    name="horde",
    help="Horde: load testing and capacity lab. Run `horde run --help` to start.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# The order `horde --help` lists them in: a run's commands, the stored runs, the built-in target,
# the emulated link, the plan's own; then the results center (report, export, compare, trend),
# the dashboard, the starter plan, the production profile and the plans other tools wrote.
for family in (run, runs, target, link, plan, results, web, init, profile, conversion):
    family.register(app)


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="print the version")] = False) -> None:
    if version:
        stdout.print(f"horde {__version__}")
        raise typer.Exit(0)


def print_error(error: HordeError) -> None:
    # soft_wrap: each message stays one line however long (logs are grepped for file:line).
    stderr.print(f"[bold red]error:[/] {escape(error.message)}", highlight=False, soft_wrap=True)
    if isinstance(error, PlanInvalid):
        for problem in error.problems:
            stderr.print(f"  {problem}", highlight=False, markup=False, soft_wrap=True)
            if problem.hint:
                stderr.print(f"      hint: {problem.hint}", highlight=False, markup=False, soft_wrap=True)
    if error.hint:
        stderr.print(f"[bold cyan]hint:[/] {escape(error.hint)}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``horde`` command; returns (and exits with) the exit code."""
    try:
        code = app(args=argv, standalone_mode=False)
    except HordeError as error:
        print_error(error)
        code = error.exit_code
    except typer.TyperException as error:
        # Usage errors (unknown flag, bad value): the parser's own message, then exit code 2.
        show = getattr(error, "show", None)
        if callable(show):
            show()
        else:
            stderr.print(f"error: {error.format_message()}")
        code = ExitCode.INVALID_INPUT if error.exit_code == 2 else error.exit_code
    except (typer.Abort, KeyboardInterrupt):
        stderr.print("interrupted")
        code = ExitCode.INTERRUPTED
    except typer.Exit as exit_:
        code = exit_.exit_code
    code = int(code) if isinstance(code, int) else ExitCode.OK
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
