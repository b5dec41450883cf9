"""The workload models of a plan: how many VUs (closed) or what arrival rate (open) each stage
asks for, written as stages or as a compact profile (:mod:`horde.plan.profiles`). Exported by
:mod:`horde.plan` with the rest of the plan's models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidatorFunctionWrapHandler, model_validator

from horde.plan.common import (
    MAX_RATE_PER_S,
    MAX_STAGE_DURATION_S,
    MAX_VUS,
    STRICT_KEYS,
    TAGGED,
    custom,
    raise_located,
    type_is_required,
)
from horde.plan.profiles import PROFILE_HINT, lower_profile
from horde.plan.build_rules import workload_problems


def _asked(workload: Any) -> Any:
    """The engine's rules on a workload built (its stages, its levels' bounds), asked: the
    workload, or its problems located in it with the engine's words."""
    problems = workload_problems(workload.model_dump_json(by_alias=True))
    if problems:
        raise_located(type(workload).__name__, problems)
    return workload


class ClosedStage(BaseModel):
    """Moves the VU count linearly from the previous level to 'vus' over 'duration_s'."""

    model_config = STRICT_KEYS

    duration_s: float = Field(gt=0, le=MAX_STAGE_DURATION_S, description="how long the stage lasts, in seconds; > 0")
    vus: int = Field(ge=0, le=MAX_VUS, description="the VU count reached at the end of the stage; >= 0")


class OpenStage(BaseModel):
    """Moves the arrival rate linearly from the previous rate to 'rate_per_s' over 'duration_s'."""

    model_config = STRICT_KEYS

    duration_s: float = Field(gt=0, le=MAX_STAGE_DURATION_S, description="how long the stage lasts, in seconds; > 0")
    rate_per_s: float = Field(
        ge=0, le=MAX_RATE_PER_S, description="the arrival rate reached at the end of the stage, per second; >= 0"
    )


def _lowered_profile(data: Any, model: str, start_key: str, level_key: str, whole: bool) -> Any:
    """A workload written with a compact ``profile`` gets its start and stages from it."""
    if not isinstance(data, dict) or data.get("profile") is None:
        return data
    text = data["profile"]
    problem: str | None = None
    if not isinstance(text, str):
        problem = "must be text such as 'line(0, 100, 1m) const(100, 5m)'"
    elif "stages" in data or start_key in data:
        problem = f"give either 'profile' or '{start_key}'/'stages', not both"
    else:
        try:
            start, stages = lower_profile(text)
        except ValueError as error:
            problem = str(error)
        else:
            if whole and any(level != int(level) for level in [start, *(level for _, level in stages)]):
                problem = "a VU count must be a whole number at every level"
    if problem is not None:
        raise_located(model, [(("profile",), text, custom("profile", problem, PROFILE_HINT))])
    convert = int if whole else float
    return {
        **data,
        start_key: convert(start),
        "stages": [{"duration_s": duration, level_key: convert(level)} for duration, level in stages],
    }


def _stages_or_profile(schema: dict[str, Any]) -> None:
    type_is_required(schema)
    schema["required"] = [key for key in schema.get("required", []) if key != "stages"]


class ClosedModel(BaseModel):
    """A number of VUs, each looping the scenario's steps until the stages end."""

    model_config = ConfigDict(**{**TAGGED, "json_schema_extra": _stages_or_profile})

    type: Literal["closed"] = Field(default="closed", description="this workload model: 'closed'")
    start_vus: int = Field(default=0, ge=0, le=MAX_VUS, description="the VU count the first stage starts from; >= 0")
    stages: list[ClosedStage] = Field(
        json_schema_extra={"minItems": 1},
        description="the load profile: each stage moves the VU count linearly to its 'vus' over "
        "its 'duration_s', e.g. [{duration_s: 5, vus: 20}, {duration_s: 15, vus: 20}]",
    )
    profile: str | None = Field(
        default=None,
        exclude=True,
        description="instead of start_vus and stages: 'line(0, 100, 1m) const(100, 5m)', 'step(10, 100, 10, 30s)'",
    )

    @model_validator(mode="before")
    @classmethod
    def _lower_profile(cls, data: Any) -> Any:
        return _lowered_profile(data, "ClosedModel", "start_vus", "vus", whole=True)

    @model_validator(mode="wrap")
    @classmethod
    def _check_workload(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _asked(handler(data))


class OpenModel(BaseModel):
    """Arrivals at a rate; each arrival runs one iteration on a free VU."""

    model_config = ConfigDict(**{**TAGGED, "json_schema_extra": _stages_or_profile})

    type: Literal["open"] = Field(default="open", description="this workload model: 'open'")
    start_rate_per_s: float = Field(
        default=0, ge=0, le=MAX_RATE_PER_S, description="the arrival rate the first stage starts from, per second; >= 0"
    )
    stages: list[OpenStage] = Field(
        json_schema_extra={"minItems": 1},
        description="the load profile: each stage moves the arrival rate linearly to its "
        "'rate_per_s' over its 'duration_s', e.g. [{duration_s: 10, rate_per_s: 50}]",
    )
    profile: str | None = Field(
        default=None,
        exclude=True,
        description="instead of start_rate_per_s and stages: 'line(10, 500, 2m)', "
        "'step(100, 1000, 100, 30s)', 'const(200, 10m)'",
    )

    @model_validator(mode="before")
    @classmethod
    def _lower_profile(cls, data: Any) -> Any:
        return _lowered_profile(data, "OpenModel", "start_rate_per_s", "rate_per_s", whole=False)

    max_vus: int = Field(
        ge=1,
        le=MAX_VUS,
        description="the most VUs that may be busy at once; an arrival that finds them all busy "
        "is counted as dropped, never queued; >= 1",
    )
    arrivals: Literal["uniform", "poisson"] = Field(
        default="uniform",
        description="how arrivals are spaced: 'uniform' (evenly) or 'poisson' (independent, "
        "exponential gaps, as from many independent clients)",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _check_workload(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return _asked(handler(data))


Workload = Annotated[Union[ClosedModel, OpenModel], Field(discriminator="type")]


def peak_vus(workload: ClosedModel | OpenModel) -> int:
    """The most VUs a workload model can run at once: a closed model's highest level, an open
    model's ``max_vus``.

    >>> peak_vus(ClosedModel(start_vus=5, stages=[ClosedStage(duration_s=1, vus=3)]))
    5
    """
    if isinstance(workload, OpenModel):
        return workload.max_vus
    return max([workload.start_vus, *(stage.vus for stage in workload.stages)])
