"""Who owns the plan's rules: horde-plan (crates/horde-plan) is to be the one semantic rule set,
and pydantic keeps the types, defaults, unknown-key refusal, the JSON Schema and the builder.

This test walks every pydantic model of ``horde.plan`` and lists its validators. Each must be
either type-level (with the reason it is) or in ``NOT_YET_THE_ENGINE_S``: a semantic rule that
horde-plan also checks and that is still to leave pydantic (issue 38). That list only shrinks: a
new semantic validator in pydantic fails here; write the rule in horde-plan instead.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys

from pydantic import BaseModel

import horde.plan  # noqa: F401  (loads the package whose modules are walked)

#: Validators that read or shape input into the model's types and defaults: pydantic's to keep.
TYPE_LEVEL = {
    "control.Threshold._parse": "parses a threshold's text form ('p95 < 300ms') into its fields",
    "control.Threshold._from_text": "accepts the text form in place of the mapping",
    "control.Threshold._keep_parsed": "keeps the parsed fields beside the text the user wrote",
    "control.AutostopRule._parse": "parses a rule's text form into its fields",
    "control.AutostopRule._from_text": "accepts the text form in place of the mapping",
    "control.AutostopRule._keep_parsed": "keeps the parsed fields beside the text the user wrote",
    "model.Feeder._infer_format": "a default: the format told from the file's extension",
    "workloads.ClosedModel._lower_profile": "a shorthand (a profile) lowered to stages before the types are read",
    "workloads.OpenModel._lower_profile": "a shorthand (a profile) lowered to stages before the types are read",
}

#: Semantic rules still written in pydantic as well as in horde-plan: the rest of issue 38's move.
NOT_YET_THE_ENGINE_S = {
    "common.UniformThinkTime._check_range",
    "control.TargetResponseTime._pace_bounds",
    "message.Network._rate_limit",
    "message.ConnectStep._check_path",
    "message.ConnectStep._check_headers",
    "message.SendStep._check_json",
    "message.SendStep._check_payload",
    "message.ReceiveStep._check_match",
    "message.ReceiveStep._check_rules",
    "message.PingStep._check_numbering",
    "message.StreamStep._check_json",
    "message.StreamStep._check_stream",
    "model.Feeder._check_name",
    "model.Scenario._check_header_names",
    "model.Scenario._check_structure",
    "model.Plan._check_monitor_names",
    "model.Plan._check_parameters",
    "model.Plan._check_scenario_names",
    "model.Plan._check_control_names",
    "model.Plan._check_message_steps",
    "monitors._Monitor._check_name",
    "monitors.HostMonitor._check_name",
    "monitors.Series._check_patterns",
    "monitors.PrometheusMonitor._check_name",
    "monitors.PrometheusMonitor._check_url",
    "monitors.PostgresMonitor._check_name",
    "monitors.PostgresMonitor._check_dsn",
    "rules.Extractor._check_var",
    "rules.Extractor._check_default",
    "rules.Extractor._check_expression",
    "rules.JsonCheck._check_equals",
    "sql.SqlExtractor._check_var",
    "sql.SqlExtractor._check_default",
    "sql.SqlExtractor._check_column",
    "sql.SqlRowCountCheck._check_bounds",
    "sql.SqlStep._check_statements",
    "steps.HttpStep._check_method",
    "steps.HttpStep._check_path",
    "steps.HttpStep._check_header_names",
    "steps.HttpStep._check_json",
    "steps.HttpStep._check_one_body",
    "steps.ParallelStep._check_requests_only",
    "steps.LoopStep._check_while",
    "steps.LoopStep._check_for_each",
    "steps.LoopStep._check_as",
    "steps.LoopStep._check_kind",
    "steps.IfStep._check_condition",
    "target.Target._check_base_url",
    "target.Target._check_header_names",
    "target.Target._check_instances",
    "workloads.ClosedModel._check_duration",
    "workloads.OpenModel._check_duration",
}


def _validators() -> set[str]:
    package = sys.modules["horde.plan"]
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"horde.plan.{info.name}")
        for model in vars(module).values():
            if not (inspect.isclass(model) and issubclass(model, BaseModel) and model.__module__ == module.__name__):
                continue
            decorators = model.__pydantic_decorators__
            for name in (*decorators.field_validators, *decorators.model_validators):
                found.add(f"{info.name}.{model.__qualname__}.{name}")
    return found


def test_each_pydantic_validator_is_type_level_or_listed_to_move() -> None:
    found = _validators()
    unlisted = sorted(found - set(TYPE_LEVEL) - NOT_YET_THE_ENGINE_S)
    assert unlisted == [], f"semantic rules belong in crates/horde-plan (or, if type-level, in TYPE_LEVEL with why): {unlisted}"


def test_the_lists_name_only_validators_that_exist() -> None:
    gone = sorted((set(TYPE_LEVEL) | NOT_YET_THE_ENGINE_S) - _validators())
    assert gone == [], f"moved or removed: take them off the lists {gone}"


def test_the_walk_finds_known_validators() -> None:
    # Known answers, read from the source: a step's method and a think time's range.
    found = _validators()
    assert {"steps.HttpStep._check_method", "common.UniformThinkTime._check_range"} <= found
