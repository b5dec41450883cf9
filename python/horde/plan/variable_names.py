"""The names templates read as variables (an extractor's ``var``, a feeder's ``name``), by the
engine's rule: horde-plan's ``variable_name_problem`` words the problem and its hint, and the
plan's types relay it so that a plan built in code fails at the model being built."""

from __future__ import annotations

from horde import _engine
from horde.plan.common import custom


def check_variable_name(name: str, what: str) -> str:
    """``name``, when the engine accepts it as a variable's (``what`` says whose: "feeder
    name", "variable"); a located pydantic error with the engine's message and hint otherwise."""
    problem = _engine.variable_name_problem(name, what)
    if problem is not None:
        message, hint = problem
        raise custom("variable_name", message, hint)
    return name
