"""The monitors layer: the target's side of a run (hosts, exporters, databases), on its time axis.

Each monitor of the plan (:mod:`horde.plan.monitors`) has a source (:mod:`~horde.monitors.host`,
:mod:`~horde.monitors.prometheus` with :mod:`~horde.monitors.exposition` and
:mod:`~horde.monitors.node_exporter`, :mod:`~horde.monitors.postgres`) read on a thread of its own
(:mod:`~horde.monitors.sampler`), every second by default, sample N taken at second N of the run
like the snapshots. The conductor stores the samples (``monitor_samples``), feeds them to the
diagnosis (:mod:`~horde.monitors.diagnosis`), to autostop and thresholds
(:mod:`~horde.monitors.conditions`) and to the sinks, and puts :mod:`~horde.monitors.summary`'s
block in the run's summary. Imports plan, engine, store and results; control imports it.
"""

from horde.monitors.conditions import ConditionStreak, judge_monitor_condition
from horde.monitors.diagnosis import Diagnosis, Finding
from horde.monitors.sampler import Monitoring, source_for
from horde.monitors.source import Source, SourceUnavailable
from horde.monitors.summary import monitors_block

__all__ = [
    "ConditionStreak",
    "Diagnosis",
    "Finding",
    "Monitoring",
    "Source",
    "SourceUnavailable",
    "judge_monitor_condition",
    "monitors_block",
    "source_for",
]
