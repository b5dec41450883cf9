"""Horde: a load-testing and capacity lab.

The Python package is the control plane: it reads plans, drives the native engine
(``horde._engine``, built from ``crates/horde-py``), stores every run and summarises it.

Scenarios are written in YAML or with the builder of :mod:`horde.plan.builder`, exported here::

    from horde import plan, scenario, http, choice, branch, closed, stage

``plan`` and ``scenario`` here are the builder's functions, which hide the modules of the same
names as attributes of the package: import from the packages with ``from horde.plan import Plan``
(``import horde.plan as m`` would give the function).

The layers, one package each, bottom up (each imports only those before it): :mod:`horde.errors`,
:mod:`horde.plan` (the contract and how a plan comes to be), :mod:`horde.engine` (the only one
that imports ``horde._engine``), :mod:`horde.store`, :mod:`horde.results`, :mod:`horde.cluster`,
:mod:`horde.monitors` (the target's side of a run), :mod:`horde.control` (the conductor and
steering), :mod:`horde.sinks`, :mod:`horde.report`, :mod:`horde.profile` (access logs into a
production profile), :mod:`horde.web` and :mod:`horde.cli`; ARCHITECTURE.md maps them.

The ``horde`` command (:mod:`horde.cli`): ``run``, ``try``, ``sight``, ``scale``, ``retarget``,
``runs``, ``show``, ``target``, ``schema``, ``validate``, ``report``, ``export``, ``compare``,
``trend``, ``ui``, ``init`` and ``profile``.
"""

__version__ = "0.1.0"

from horde.plan import Plan  # noqa: E402
from horde.plan import builder as _builder  # noqa: E402
from horde.plan.builder import *  # noqa: E402,F403  (its __all__: the functions and their types)

__all__ = ["Plan", "__version__"]
__all__ += _builder.__all__
