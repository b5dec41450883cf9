"""Horde: a load-testing and capacity lab.

The Python package is the control plane: it reads plans, drives the native engine
(``horde._engine``, built from ``crates/horde-py``), stores every run and summarises it.

Scenarios are written in YAML or with the builder of :mod:`horde.plan.builder`, exported here::

    from horde import plan, scenario, http, choice, branch, closed, stage

``plan`` and ``scenario`` here are the builder's functions, which hide the modules of the same
names as attributes of the package: import from the modules with ``from horde.plan import Plan``
(``import horde.plan as m`` would give the function).
"""

__version__ = "0.1.0"

from horde.plan import Plan  # noqa: E402
from horde.plan.builder import (  # noqa: E402
    branch,
    check,
    choice,
    closed,
    constant,
    end_iteration,
    exponential,
    normal,
    extract,
    feeder,
    group,
    http,
    loop,
    open_model,
    param,
    plan,
    scenario,
    stage,
    think,
    uniform,
    when,
)

__all__ = [
    "Plan",
    "__version__",
    "branch",
    "check",
    "choice",
    "closed",
    "constant",
    "end_iteration",
    "exponential",
    "normal",
    "extract",
    "feeder",
    "group",
    "http",
    "loop",
    "open_model",
    "param",
    "plan",
    "scenario",
    "stage",
    "think",
    "uniform",
    "when",
]
