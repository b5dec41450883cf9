"""The plan's own commands, which send nothing: ``horde schema`` (the plan's JSON Schema) and
``horde validate`` (a plan checked on both sides, pydantic and the engine). ``register(app)`` adds
them to the ``horde`` application."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from horde.errors import ExitCode
from horde.cli.arguments import HordeCommand, parse_params
from horde.cli.terminal import stdout


def register(app: typer.Typer) -> None:
    """Add ``schema`` and ``validate`` to ``app``."""
    app.command("schema", cls=HordeCommand, epilog="Examples:\n\n  horde schema > plan.schema.json")(schema)
    app.command(
        "validate",
        cls=HordeCommand,
        epilog="Examples:\n\n  horde validate plan.yaml\n\n  horde validate examples/game -p players=500",
    )(validate)


def schema() -> int:
    """Print the plan's JSON Schema (for editors that check YAML and JSON plans)."""
    from horde.plan import plan_json_schema

    print(json.dumps(plan_json_schema(), indent=2))
    return ExitCode.OK


#: Step types that hold or order other steps, not measured themselves (``horde validate`` counts the rest).
_CONTROL_FLOW = ("group", "parallel", "choice", "loop", "if", "think", "end_iteration")


def validate(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="plan file or folder")],
    param: Annotated[
        Optional[list[str]],
        typer.Option(
            "--param",
            "-p",
            metavar="NAME=VALUE",
            help="set a plan parameter (repeatable); else $HORDE_PARAM_NAME, else its default",
        ),
    ] = None,
) -> int:
    """Check a plan on both sides (pydantic and the engine) without sending any request."""
    from horde.engine.run import checked_plan_json
    from horde.plan.loader import load_plan_file

    loaded = load_plan_file(plan_path, parse_params(param or []))
    plan = loaded.plan
    checked_plan_json(plan, locate=loaded.located, source=loaded.label)
    steps = sum(1 for scenario in plan.scenarios for step in scenario.all_steps() if step.type not in _CONTROL_FLOW)
    durations = [sum(stage.duration_s for stage in scenario.workload.stages) for scenario in plan.scenarios]
    stdout.print(
        f"{plan_path}: valid — {len(plan.scenarios)} scenario(s), {steps} step(s), {max(durations):g} s of stages",
        markup=False,
    )
    if plan.parameters:
        values = ", ".join(f"{name}={json.dumps(value)}" for name, value in plan.parameters.items())
        stdout.print(f"parameters: {values}", markup=False)
    return ExitCode.OK
