"""The control layer: what holds a run where asked and judges it while it goes.

:mod:`~horde.control.conductor` conducts a run from start to verdict (store record, engine run,
sinks, controls from outside, Ctrl-C). It consults :mod:`~horde.control.steering` (find-max in
:mod:`~horde.control.find_max`, target response time; both move the level through
:mod:`~horde.control.steered_level`), :mod:`~horde.control.autostop` and
:mod:`~horde.control.thresholds`, which read the figures of :mod:`~horde.control.measure`. At the
end :mod:`~horde.control.capacity` answers capacity questions. :mod:`~horde.control.sight` (the
sighting shot) and :mod:`~horde.control.scale` (the scalability study) build the plans of those
two studies.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from horde.control.conductor import Outcome, Sink, Sinks, conduct

__all__ = ["Outcome", "Sink", "Sinks", "conduct"]


def __getattr__(name: str) -> Any:
    # The conductor brings the store (SQLAlchemy, Alembic) and the cluster: it is loaded when one
    # of its names is asked for, so that a module needing only the sighting shot's sizing or the
    # figures of measure.py (the plan writer of `horde profile`, `horde validate`) stays light.
    if name in __all__:
        from horde.control import conductor

        return getattr(conductor, name)
    raise AttributeError(f"module 'horde.control' has no attribute {name!r}")
