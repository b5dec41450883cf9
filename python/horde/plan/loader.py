"""Reading plan files: YAML, JSON or Python, every problem located in the file.

:func:`load_plan` accepts a ``.yaml``/``.yml`` file, a ``.json`` file, a ``.py`` module that
defines ``plan``, or a directory holding one of ``plan.yaml``, ``plan.yml``, ``plan.json``,
``plan.py`` (so ``horde run examples/quickstart`` works). Whatever goes wrong (the file is
missing, it does not parse, the plan breaks a rule of :mod:`horde.plan`) ends in one
:class:`~horde.errors.PlanInvalid` that lists every problem, each located as precisely as the
format allows:

- YAML: ``FILE:LINE: PATH``, the line of the offending key (of the parent mapping when a key is
  missing), e.g. ``plan.yaml:12: scenarios[0].steps[1].path``;
- JSON: ``FILE:LINE:COLUMN`` for a syntax error, ``FILE:LINE: PATH`` for a plan problem;
- Python: ``FILE:LINE`` for an exception raised by the module, ``PATH`` for a plan problem.

Before the plan is checked, its parameters are substituted (:mod:`horde.plan.parameters`: values
from ``params``, that is ``-p``, then ``HORDE_PARAM_NAME``, then the defaults) and its feeders'
paths are made absolute (relative to the plan file's folder); after, the engine's rules
(:mod:`horde.plan.engine_rules`, beside pydantic's types) and the feeder files
(:mod:`horde.plan.feeders`) are checked. :func:`load_plan_file` also keeps what is needed to
place a problem found later (a part to supply, reported by the check before a run) on its line:
:meth:`LoadedPlan.locate`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from horde.errors import InvalidInput, PlanInvalid, Problem
from horde.plan.bounds import MAX_DEPTH, MAX_PLAN_BYTES, MAX_PROBLEMS, flow_depth_problem, shape_problems
from horde.plan.common import Loc, parse_path
from horde.plan.engine_rules import rule_problems, rule_problems_beside
from horde.plan.feeders import check_feeder_file, unique_feeder_faults, unknown_column_faults
from horde.plan.model import FEEDER_FORMATS_BY_SUFFIX, Plan
from horde.plan.parameters import (
    Substituted,
    apply_parameters,
    explicit_parameters,
    parse_parameter_value,
    substitute_parameters,
    unknown_parameter_hint,
)
from horde.plan.problems import describe_validation_error, format_path, input_order

__all__ = [
    "PLAN_FILE_NAMES",
    "PLAN_SUFFIXES",
    "LoadedPlan",
    "check_plan_data",
    "load_plan",
    "load_plan_file",
    "parse_path",
]

#: What :func:`load_plan` looks for, in this order, when given a directory.
PLAN_FILE_NAMES: tuple[str, ...] = ("plan.yaml", "plan.yml", "plan.json", "plan.py")

#: The file extensions :func:`load_plan` reads.
PLAN_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json", ".py")

_WHAT_A_PLAN_IS = (
    "a plan is a .yaml, .yml, .json or .py file, or a directory holding plan.yaml (see examples/quickstart)"
)


@dataclass(frozen=True)
class LoadedPlan:
    """A plan read from a file, with what is needed to locate a problem found in it later."""

    plan: Plan
    #: The file it came from, as the user named it (a folder is resolved to its plan file).
    label: str
    #: The file's parsed tree with line numbers (YAML), or None (Python).
    document: Any = None
    #: How to read the tree when it is first needed (JSON: read only to place a problem).
    lines_of: Callable[[], Any] | None = None

    @cached_property
    def lines(self) -> Any:
        """The parsed tree with line numbers, or None."""
        if self.document is not None or self.lines_of is None:
            return self.document
        document = self.lines_of()
        return None if isinstance(document, DuplicateKeyError) else document

    def locate(self, path: str) -> str:
        """``FILE:LINE: PATH`` for a problem at ``path`` (``scenarios[0].steps[1].path``, as the
        engine reports it): the line of the deepest part of the path the file writes; just
        ``PATH`` for a Python plan.

        >>> LoadedPlan(plan=None, label="plan.py").locate("scenarios[0].steps[1].path")  # type: ignore[arg-type]
        'scenarios[0].steps[1].path'
        """
        if self.lines is None:
            return path
        return _located(self.label, _line_of(self.lines, parse_path(path)), path)

    def located(self, problems: list[Problem]) -> list[Problem]:
        """The problems (located by path, as the engine's are) located in the file."""
        return [Problem(self.locate(p.location), p.message, hint=p.hint) for p in problems]


def load_plan(path: str | Path, params: Mapping[str, object] | None = None) -> Plan:
    """Reads and validates the plan at ``path`` (a file or a directory holding one).

    ``params`` sets parameters (what ``-p NAME=VALUE`` gives: text is read as a JSON scalar when
    it is one); a name the plan does not declare is an :class:`~horde.errors.InvalidInput`.
    Raises :class:`~horde.errors.PlanInvalid` listing every problem, located in the file.
    """
    return load_plan_file(path, params).plan


def load_plan_file(path: str | Path, params: Mapping[str, object] | None = None) -> LoadedPlan:
    """:func:`load_plan`, keeping the file's tree to locate problems found later."""
    label = str(path)
    file = Path(path)
    if not file.exists():
        _fail(label, Problem(label, "no such file or directory", hint=f"check the path; {_WHAT_A_PLAN_IS}"))
    if file.is_dir():
        found = [file / name for name in PLAN_FILE_NAMES if (file / name).is_file()]
        if not found:
            _fail(
                label,
                Problem(
                    label,
                    "this directory holds no plan file",
                    hint=f"looked for {', '.join(PLAN_FILE_NAMES)}; add one, or give the plan file's path",
                ),
            )
        file = found[0]
        label = str(file)
    suffix = file.suffix.lower()
    if suffix not in PLAN_SUFFIXES:
        _fail(
            label,
            Problem(
                label,
                f"cannot read a plan from a '{suffix or 'extensionless'}' file",
                hint=f"{_WHAT_A_PLAN_IS}; rename the file if it holds YAML or JSON",
            ),
        )
    if suffix == ".py":
        return LoadedPlan(_load_python(file, label, params), label)
    text = _read_text(file, label)
    if suffix == ".json":
        return _load_json(text, label, file.parent, params)
    return _load_yaml(text, label, file.parent, params)


def _fail(label: str, *problems: Problem) -> NoReturn:
    raise PlanInvalid(list(problems), source=label)


def _read_text(file: Path, label: str) -> str:
    try:
        size = file.stat().st_size
        if size > MAX_PLAN_BYTES:
            return _fail(
                label,
                Problem(
                    label,
                    f"is {size:,} bytes: a plan file holds at most {MAX_PLAN_BYTES:,}",
                    hint="a plan describes behaviour; keep data (users, ids, bodies) in feeder files",
                ),
            )
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return _fail(
            label,
            Problem(
                label,
                f"is not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start})",
                hint="save the file as UTF-8",
            ),
        )
    except OSError as error:
        return _fail(
            label,
            Problem(
                label,
                f"cannot be read: {error.strerror or error}",
                hint="check that the file exists and that you may read it",
            ),
        )


# --- YAML --------------------------------------------------------------------------------------


def _yaml() -> YAML:
    # The round-trip loader keeps each key's line (``.lc``) and refuses duplicate keys.
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def _load_yaml(text: str, label: str, folder: Path, params: Mapping[str, object] | None) -> LoadedPlan:
    too_deep = flow_depth_problem(text)
    if too_deep is not None:
        line, message, hint = too_deep
        return _fail(label, Problem(f"{label}:{line}", message, hint=hint))
    try:
        document = _yaml().load(text)
    except MarkedYAMLError as error:
        return _fail(label, _yaml_syntax_problem(error, label))
    except YAMLError as error:
        return _fail(label, Problem(label, f"is not valid YAML: {error}", hint=_YAML_HINT))
    except (RecursionError, ValueError) as error:
        return _fail(label, _unreadable(label, error))
    shaped = shape_problems(document)
    if shaped:
        return _fail(
            label,
            *[
                Problem(_located(label, _line_of(document, loc), format_path(loc)), message, hint=hint)
                for loc, message, hint in shaped
            ],
        )
    if document is None:
        return _fail(
            label,
            Problem(
                label,
                "the file holds no plan (it is empty)",
                hint="start from examples/quickstart/plan.yaml",
            ),
        )
    unquoted = _unquoted_templates(document, ())
    if unquoted:
        return _fail(
            label,
            *[
                Problem(
                    _located(label, _line_of(document, loc), format_path(loc)),
                    f"{text} is read by YAML as a mapping, not as text",
                    hint=f'quote it: "{text}" (YAML reads {{ }} as a mapping)',
                )
                for loc, text in unquoted
            ],
        )
    plan = _check_located(_plain(document), document, label, folder, params)
    return LoadedPlan(plan, label, document)


def _unquoted_templates(node: Any, loc: Loc) -> list[tuple[Loc, str]]:
    """Where a YAML file wrote ``{{ x }}`` without quotes: a mapping whose key is a mapping."""
    found: list[tuple[Loc, str]] = []
    if isinstance(node, dict):
        keys = list(node)
        if len(keys) == 1 and isinstance(keys[0], Mapping) and len(keys[0]) == 1:
            return [(loc, "{{ " + str(next(iter(keys[0]))) + " }}")]
        for key, value in node.items():
            found += _unquoted_templates(value, (*loc, str(key)))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _unquoted_templates(item, (*loc, index))
    return found


_YAML_HINT = (
    "check the indentation and the quoting on this line and the one before it "
    "(YAML indents with spaces; quote text holding ': ' or starting with '{', '[', '*' or '&')"
)


def _yaml_syntax_problem(error: MarkedYAMLError, label: str) -> Problem:
    mark = error.problem_mark or error.context_mark
    location = f"{label}:{mark.line + 1}" if mark is not None else label
    problem = str(error.problem or error.context or "invalid YAML")
    if isinstance(error, DuplicateKeyError):
        first = problem.split(" with value ", 1)[0]
        started = error.context_mark
        where = f" (the mapping starts on line {started.line + 1})" if started is not None else ""
        return Problem(
            location,
            first,
            hint=f"a key may appear only once in a mapping{where}; remove or rename one of them",
        )
    message = problem
    if error.context and error.problem and error.context_mark is not None:
        message += f" ({error.context} started on line {error.context_mark.line + 1})"
    hint = _YAML_HINT
    if "\\t" in problem or "\t" in problem:
        hint = "indent with spaces, not tabs"
    return Problem(location, f"YAML syntax error: {message}", hint=hint)


def _plain(node: Any) -> Any:
    """A copy of ruamel's round-trip tree as plain dicts, lists, str, int, float and bool."""
    if isinstance(node, dict):
        return {(key if type(key) is str else str(key)): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, str):
        return str.__str__(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _find_key(mapping: dict[Any, Any], key: str | int) -> Any:
    if key in mapping:
        return key
    for candidate in mapping:
        if str(candidate) == str(key):
            return candidate
    return None


def _line_of(document: Any, loc: tuple[str | int, ...]) -> int | None:
    """The 1-based line of the deepest part of ``loc`` present in a ruamel tree."""
    try:
        line: int = document.lc.line
        node = document
        for element in loc:
            if isinstance(node, CommentedMap):
                key = _find_key(node, element)
                if key is None:
                    break
                line = node.lc.key(key)[0]
                node = node[key]
            elif isinstance(node, CommentedSeq) and isinstance(element, int) and 0 <= element < len(node):
                line = node.lc.item(element)[0]
                node = node[element]
            else:
                break
        return line + 1
    except (AttributeError, KeyError, IndexError, TypeError):
        return None


def _located(label: str, line: int | None, path: str) -> str:
    where = f"{label}:{line}" if line is not None else label
    return f"{where}: {path}" if path else where


def _check_located(data: Any, document: Any, label: str, folder: Path, params: Mapping[str, object] | None) -> Plan:
    """Parameters, feeder paths, the plan's rules, the feeder files: every problem at once,
    each located in the file (by line where ``document`` has lines)."""
    # Before anything walks the data (parameters are substituted recursively).
    shaped = shape_problems(data)
    if shaped:
        _fail(
            label,
            *[
                Problem(
                    _located(label, _line_of(document, loc) if document is not None else None, format_path(loc)),
                    message,
                    hint=hint,
                )
                for loc, message, hint in shaped
            ],
        )
    return check_plan_data(apply_parameters(data, params), label=label, document=document, folder=folder, in_file=True)


def check_plan_data(
    substituted: Substituted,
    *,
    label: str | None = None,
    document: Any = None,
    folder: Path | None = None,
    in_file: bool = False,
) -> Plan:
    """Validates a plan's data once its parameters are substituted (``horde.plan.builder.plan`` uses
    it too): unknown parameters, the plan's rules and, given the ``folder`` feeder paths are
    relative to, the feeder files; every problem at once. ``in_file``: the data is a YAML or
    JSON file's, so problems are located ``FILE:LINE: PATH`` (the line where ``document`` has
    lines); otherwise by path alone.
    """
    data = substituted.data
    shaped = shape_problems(data)
    if shaped:
        raise PlanInvalid(
            [
                Problem(
                    _located(label, _line_of(document, loc) if document is not None else None, format_path(loc))
                    if in_file and label is not None
                    else format_path(loc),
                    message,
                    hint=hint,
                )
                for loc, message, hint in shaped
            ],
            source=label,
        )
    feeders = _absolute_feeder_paths(data, folder) if folder is not None else []
    declared = (
        [str(n) for n in data["parameters"]]
        if isinstance(data, dict) and isinstance(data.get("parameters"), dict)
        else []
    )
    issues: list[tuple[Loc, str, str | None]] = [
        (loc, f"unknown parameter '{name}'", unknown_parameter_hint(name, declared))
        for loc, name in substituted.unknown
    ]
    unknown_at = {loc for loc, _ in substituted.unknown}
    plan: Plan | None = None
    more = 0
    try:
        plan = Plan.model_validate(data)
    except ValidationError as error:
        # Past a few dozen problems a reader stops reading; describing 20,000 costs seconds.
        more = max(0, error.error_count() - MAX_PROBLEMS)
        for issue in describe_validation_error(error, limit=MAX_PROBLEMS):
            if issue.loc not in unknown_at:  # else the unknown parameter explains it
                issues.append((issue.loc, issue.message, _with_origin(substituted, issue.loc, issue.hint)))
    # pydantic has read the types; the engine owns what the values must mean together.
    ruled = rule_problems(plan) if plan is not None else rule_problems_beside(data, [loc for loc, _, _ in issues])
    issues += [
        (loc, message, _with_origin(substituted, loc, hint)) for loc, message, hint in ruled if loc not in unknown_at
    ]
    for loc, shown, absolute, file_format in feeders:
        fault = check_feeder_file(absolute, file_format)
        if fault is not None:
            issues.append(((*loc, "path"), f"feeder file '{shown}' {fault.message}", fault.hint))
    if plan is not None and not issues and folder is not None:
        for s_index, f_index, fault in unique_feeder_faults(plan):
            issues.append((("scenarios", s_index, "feeders", f_index, "mode"), fault.message, fault.hint))
        for loc, fault in unknown_column_faults(plan):
            issues.append((loc, fault.message, fault.hint))
    if issues:

        def order(issue: tuple[Loc, str, str | None]) -> tuple[int, tuple[int, ...]]:
            line = _line_of(document, issue[0]) if document is not None else None
            return (line or 0, input_order(data, issue[0]))

        issues.sort(key=order)
        problems = [
            Problem(
                _located(label, _line_of(document, loc) if document is not None else None, format_path(loc))
                if in_file and label is not None
                else format_path(loc),
                message,
                hint=hint,
            )
            for loc, message, hint in issues
        ]
        if more:
            problems.append(
                Problem(
                    label or "plan",
                    f"and {more:,} more problems of the same check",
                    hint=f"the first {MAX_PROBLEMS} are listed; fix them and check again",
                )
            )
        raise PlanInvalid(problems, source=label) from None
    if plan is None:  # pragma: no cover - a failed validation always lists an issue
        raise AssertionError("validation failed without an issue")
    return plan


def _with_origin(substituted: Substituted, loc: Loc, hint: str | None) -> str | None:
    """The hint of a problem at ``loc``, saying which parameter the value there comes from."""
    if loc not in substituted.origins:
        return hint
    note = f"the value comes from parameter '{substituted.origins[loc]}'"
    return f"{hint} ({note})" if hint else note


def _absolute_feeder_paths(data: Any, folder: Path) -> list[tuple[Loc, str, str, str]]:
    """Makes each feeder's path absolute (relative to ``folder``), in place, and the target's
    ``ca_file`` too; returns the feeders whose file can be checked: (location, path as written,
    absolute path, format)."""
    found: list[tuple[Loc, str, str, str]] = []
    target = data.get("target") if isinstance(data, dict) else None
    if isinstance(target, dict) and isinstance(target.get("ca_file"), str) and target["ca_file"]:
        target["ca_file"] = os.path.abspath(os.path.join(folder, os.path.expanduser(target["ca_file"])))
    scenarios = data.get("scenarios") if isinstance(data, dict) else None
    if not isinstance(scenarios, list):
        return found
    for s_index, scenario in enumerate(scenarios):
        feeders = scenario.get("feeders") if isinstance(scenario, dict) else None
        if not isinstance(feeders, list):
            continue
        for f_index, feeder in enumerate(feeders):
            if not isinstance(feeder, dict) or not isinstance(feeder.get("path"), str) or not feeder["path"]:
                continue
            shown = feeder["path"]
            absolute = os.path.abspath(os.path.join(folder, os.path.expanduser(shown)))
            feeder["path"] = absolute
            file_format = feeder.get("format")
            if file_format is None:
                file_format = FEEDER_FORMATS_BY_SUFFIX.get(os.path.splitext(shown)[1].lower())
            if file_format in ("csv", "jsonl"):
                found.append((("scenarios", s_index, "feeders", f_index), shown, absolute, str(file_format)))
    return found


# --- JSON --------------------------------------------------------------------------------------


def _load_json(text: str, label: str, folder: Path, params: Mapping[str, object] | None) -> LoadedPlan:
    duplicates: list[str] = []

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in pairs:
            if key in mapping:
                duplicates.append(key)
            mapping[key] = value
        return mapping

    try:
        data = json.loads(text, object_pairs_hook=refuse_duplicates)
    except json.JSONDecodeError as error:
        return _fail(
            label,
            Problem(
                f"{label}:{error.lineno}:{error.colno}",
                f"JSON syntax error: {error.msg}",
                hint="look for a missing or extra comma, quote or bracket at this point or just "
                "before it (JSON allows no comments and no trailing commas)",
            ),
        )
    except (RecursionError, ValueError) as error:
        return _fail(label, _unreadable(label, error))
    if duplicates:
        # JSON is YAML 1.2 flow style: ruamel gives line numbers when it can read the text.
        document = _json_lines(text)
        return _fail(
            label,
            *[
                Problem(
                    _duplicate_location(label, document, key),
                    f"duplicate key '{key}'",
                    hint="a key may appear only once in an object; remove or rename one of them",
                )
                for key in duplicates
            ],
        )
    # The lines are read only to place a problem: ruamel reads JSON at ~50 KB/s, Python's
    # parser at ~50 MB/s, and a valid plan never needs them.
    try:
        plan = _check_located(data, None, label, folder, params)
    except PlanInvalid:
        lines = _json_lines(text)
        _check_located(data, lines if not isinstance(lines, DuplicateKeyError) else None, label, folder, params)
        raise
    return LoadedPlan(plan, label, lines_of=lambda: _json_lines(text))


def _unreadable(label: str, error: BaseException) -> Problem:
    """A file Python's parsers give up on: nesting past their recursion, an integer past
    Python's 4,300 digits."""
    if isinstance(error, RecursionError):
        return Problem(label, "nests too deep to read", hint=f"a plan nests at most {MAX_DEPTH} levels deep")
    return Problem(
        label,
        f"cannot be read: {error}",
        hint="a number in a plan has at most a few digits; write a long identifier as text, in quotes",
    )


#: A JSON plan past this size has its problems located by path alone: ruamel, which gives the
#: lines, reads JSON at ~50 KB/s, and a path names the place exactly.
JSON_LINES_MAX_BYTES = 64 * 1024


def _json_lines(text: str) -> Any:
    if len(text) > JSON_LINES_MAX_BYTES:
        return None
    try:
        return _yaml().load(text)
    except DuplicateKeyError as error:
        return error
    except Exception:  # noqa: BLE001 - line numbers are a nicety; the JSON parser has spoken
        return None


def _duplicate_location(label: str, document: Any, key: str) -> str:
    if isinstance(document, DuplicateKeyError) and document.problem_mark is not None:
        if f'"{key}"' in str(document.problem):
            return f"{label}:{document.problem_mark.line + 1}"
    return label


# --- Python ------------------------------------------------------------------------------------


def _load_python(file: Path, label: str, params: Mapping[str, object] | None) -> Plan:
    resolved = file.resolve()
    module_name = f"_horde_plan_{abs(hash(str(resolved))):x}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        return _fail(label, Problem(label, "cannot be imported as a Python module", hint=_PY_HINT))
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs (pydantic and dataclasses look their module up), with its folder
    # on sys.path so that it can import its neighbours; both are undone afterwards.
    sys.modules[module_name] = module
    sys.path.insert(0, str(resolved.parent))
    try:
        with explicit_parameters(params):
            spec.loader.exec_module(module)
    except (PlanInvalid, InvalidInput):
        raise
    except ValidationError as error:
        line = _line_in_traceback(error, resolved)
        return _fail(
            label,
            *[
                Problem(
                    _located(label, line, _qualified(error.title, issue.path)),
                    issue.message,
                    hint=issue.hint,
                )
                for issue in describe_validation_error(error)
            ],
        )
    except SyntaxError as error:
        where = f"{label}:{error.lineno}" if error.lineno else label
        return _fail(label, Problem(where, f"Python syntax error: {error.msg}", hint=_PY_HINT))
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of user code is reported
        line = _line_in_traceback(error, resolved)
        where = f"{label}:{line}" if line is not None else label
        return _fail(
            label,
            Problem(
                where,
                f"{type(error).__name__}: {error}",
                hint="fix the module: it runs each time the plan is loaded",
            ),
        )
    finally:
        sys.modules.pop(module_name, None)
        try:
            sys.path.remove(str(resolved.parent))
        except ValueError:
            pass
    if not hasattr(module, "plan"):
        return _fail(
            label,
            Problem(
                label,
                "the module defines no `plan`",
                hint="define a module-level `plan = Plan(...)` (from horde.plan import Plan), "
                "or `plan = {...}` as a dict",
            ),
        )
    plan = module.plan
    folder = resolved.parent
    if isinstance(plan, Plan):
        # Checked again: a Plan changed after it was built is not validated by pydantic. Its
        # parameters are already substituted (horde.plan() takes -p values); a leftover
        # reference gets the values the plan holds.
        _check_taken(plan, params)
        data = plan.model_dump(mode="json", by_alias=True)
        substituted = substitute_parameters(data, plan.parameters, skip_top=("parameters",))
        return check_plan_data(substituted, label=label, folder=folder)
    if isinstance(plan, dict):
        return check_plan_data(apply_parameters(plan, params), label=label, folder=folder)
    return _fail(
        label,
        Problem(
            label,
            f"`plan` is a {type(plan).__name__}, not a Plan",
            hint="define a module-level `plan = Plan(...)` (from horde.plan import Plan), or `plan = {...}` as a dict",
        ),
    )


def _check_taken(plan: Plan, params: Mapping[str, object] | None) -> None:
    """Every ``-p`` value reached a Plan built by the module (horde.plan() takes them)."""
    for name, raw in (params or {}).items():
        if name not in plan.parameters:
            declared = ", ".join(sorted(plan.parameters))
            raise InvalidInput(
                f"-p {name}: the plan has no parameter '{name}'",
                hint=f"this plan's parameters: {declared}"
                if declared
                else "the plan declares no parameters; pass parameters={...} to horde.plan()",
            )
        held = plan.parameters[name]
        value = parse_parameter_value(raw, held) if isinstance(raw, str) else raw
        if value != held:
            raise InvalidInput(
                f"-p {name}={raw}: the plan module did not take it (its plan has {name} = {json.dumps(held)})",
                hint="build the plan with horde.plan(..., parameters={...}): it takes -p values",
            )


def _qualified(model: str, path: str) -> str:
    # A plan's paths start at the plan; another model's (HttpStep(...) raised) are named after it.
    if model == Plan.__name__:
        return path
    return f"{model}.{path}" if path else model


_PY_HINT = "a .py plan is a Python module that defines a module-level `plan = Plan(...)`"


def _line_in_traceback(error: BaseException, file: Path) -> int | None:
    """The line of the plan module where the error passed last, if it did."""
    line: int | None = None
    for frame in traceback.extract_tb(error.__traceback__):
        if Path(frame.filename) == file:
            line = frame.lineno
    return line
