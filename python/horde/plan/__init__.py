"""The plan layer: the contract between the control plane and the engine, and how a plan comes to be.

A plan is one JSON document (version 1, specified field by field in docs/plan-reference.md).
This package holds its pydantic models (:mod:`~horde.plan.model` with :mod:`~horde.plan.common`,
:mod:`~horde.plan.target`, :mod:`~horde.plan.steps`, :mod:`~horde.plan.workloads`,
:mod:`~horde.plan.control`), their located problems (:mod:`~horde.plan.problems`), and the ways
a plan is written: files (:mod:`~horde.plan.loader`, with :mod:`~horde.plan.parameters`,
:mod:`~horde.plan.feeders` and :mod:`~horde.plan.profiles`), Python (:mod:`~horde.plan.builder`)
and the command line's overrides and ``--url`` quick plans (:mod:`~horde.plan.overrides`);
:mod:`~horde.plan.redaction` keeps secrets out of a plan that is stored.

Nothing here imports the engine, the control layer, the sinks, the results, the CLI or the web
dashboard (``tests/test_layout.py`` checks it): a plan is data, checked before anything runs.
"""

from horde.plan.common import (
    MAX_GRACEFUL_STOP_S,
    MAX_LOOP_COUNT,
    MAX_LOOP_ITERATIONS,
    MAX_PACING_S,
    MAX_RATE_PER_S,
    MAX_STAGE_DURATION_S,
    MAX_STEP_DEPTH,
    MAX_THINK_TIME_MS,
    MAX_TIMEOUT_MS,
    MAX_VUS,
    MAX_WEIGHT,
    METHODS,
    RESERVED_NAMES,
    ConstantThinkTime,
    ExponentialThinkTime,
    NormalThinkTime,
    ThinkTime,
    UniformThinkTime,
)
from horde.plan.target import (
    MAX_POOL_CONNECTIONS,
    ConnectionPool,
    Connections,
    Target,
)
from horde.plan.steps import (
    STEP_TYPES,
    AnyStep,
    BodyContainsCheck,
    BodyMatchesCheck,
    Branch,
    Check,
    ChoiceStep,
    EndIterationStep,
    Extractor,
    GroupStep,
    HttpStep,
    IfStep,
    JsonCheck,
    LoopStep,
    StatusCheck,
    Step,
    ThinkStep,
    iter_steps,
    plan_step,
)
from horde.plan.workloads import (
    ClosedModel,
    ClosedStage,
    OpenModel,
    OpenStage,
    Workload,
    peak_vus,
)
from horde.plan.control import (
    AutostopRule,
    FindMax,
    Steer,
    TargetResponseTime,
    Threshold,
)
from horde.plan.parameters import (
    ParameterValue,
)
from horde.plan.model import (
    Feeder,
    Plan,
    Scenario,
    plan_json_schema,
    plan_to_json,
)
from horde.plan.problems import plan_from_dict
from horde.plan.loader import LoadedPlan, check_plan_data, load_plan, load_plan_file

__all__ = [
    "AnyStep",
    "AutostopRule",
    "BodyContainsCheck",
    "BodyMatchesCheck",
    "Branch",
    "Check",
    "ChoiceStep",
    "ClosedModel",
    "ClosedStage",
    "ConnectionPool",
    "Connections",
    "ConstantThinkTime",
    "EndIterationStep",
    "ExponentialThinkTime",
    "Extractor",
    "Feeder",
    "FindMax",
    "GroupStep",
    "HttpStep",
    "IfStep",
    "JsonCheck",
    "LoadedPlan",
    "LoopStep",
    "MAX_GRACEFUL_STOP_S",
    "MAX_LOOP_COUNT",
    "MAX_LOOP_ITERATIONS",
    "MAX_PACING_S",
    "MAX_POOL_CONNECTIONS",
    "MAX_RATE_PER_S",
    "MAX_STAGE_DURATION_S",
    "MAX_STEP_DEPTH",
    "MAX_THINK_TIME_MS",
    "MAX_TIMEOUT_MS",
    "MAX_VUS",
    "MAX_WEIGHT",
    "METHODS",
    "NormalThinkTime",
    "OpenModel",
    "OpenStage",
    "ParameterValue",
    "Plan",
    "RESERVED_NAMES",
    "STEP_TYPES",
    "Scenario",
    "StatusCheck",
    "Steer",
    "Step",
    "Target",
    "TargetResponseTime",
    "ThinkStep",
    "ThinkTime",
    "Threshold",
    "UniformThinkTime",
    "Workload",
    "check_plan_data",
    "iter_steps",
    "load_plan",
    "load_plan_file",
    "peak_vus",
    "plan_from_dict",
    "plan_json_schema",
    "plan_step",
    "plan_to_json",
]
