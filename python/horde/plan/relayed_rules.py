"""The engine's rules that the plan's pydantic types relay, so that a plan built in code fails at
the model being built: horde-plan words each problem and its hint (``variable_name_problem``,
``method_problem``), and the engine's own check of a plan says the same words. Nothing here
decides anything; each function asks the binding.
"""

from __future__ import annotations

from horde import _engine
from horde.plan.common import custom

#: The HTTP methods an http step sends, upper case: horde-plan's list.
METHODS: tuple[str, ...] = tuple(_engine.http_methods())


def check_variable_name(name: str, what: str) -> str:
    """``name``, when the engine accepts it as a variable's (``what`` says whose: "feeder
    name", "variable"); a located pydantic error with the engine's message and hint otherwise."""
    problem = _engine.variable_name_problem(name, what)
    if problem is not None:
        message, hint = problem
        raise custom("variable_name", message, hint)
    return name


def check_method(method: str) -> str:
    """``method``, when an http step can send it; the engine's problem and hint otherwise."""
    problem = _engine.method_problem(method)
    if problem is not None:
        message, hint = problem
        raise custom("method", message, hint)
    return method
