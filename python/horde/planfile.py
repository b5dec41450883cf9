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
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from horde.errors import PlanInvalid, Problem
from horde.plan import Plan, plan_from_dict
from horde.plan_problems import PlanIssue, describe_validation_error, input_order

__all__ = ["PLAN_FILE_NAMES", "PLAN_SUFFIXES", "load_plan"]

#: What :func:`load_plan` looks for, in this order, when given a directory.
PLAN_FILE_NAMES: tuple[str, ...] = ("plan.yaml", "plan.yml", "plan.json", "plan.py")

#: The file extensions :func:`load_plan` reads.
PLAN_SUFFIXES: tuple[str, ...] = (".yaml", ".yml", ".json", ".py")

_WHAT_A_PLAN_IS = (
    "a plan is a .yaml, .yml, .json or .py file, or a directory holding plan.yaml "
    "(see examples/quickstart)"
)


def load_plan(path: str | Path) -> Plan:
    """Reads and validates the plan at ``path`` (a file or a directory holding one).

    Raises :class:`~horde.errors.PlanInvalid` listing every problem, located in the file.
    """
    label = str(path)
    file = Path(path)
    if not file.exists():
        _fail(label, Problem(label, "no such file or directory", hint=f"check the path; {_WHAT_A_PLAN_IS}"))
    if file.is_dir():
        found = [file / name for name in PLAN_FILE_NAMES if (file / name).is_file()]
        if not found:
            _fail(label, Problem(
                label,
                "this directory holds no plan file",
                hint=f"looked for {', '.join(PLAN_FILE_NAMES)}; add one, or give the plan file's path",
            ))
        file = found[0]
        label = str(file)
    suffix = file.suffix.lower()
    if suffix not in PLAN_SUFFIXES:
        _fail(label, Problem(
            label,
            f"cannot read a plan from a '{suffix or 'extensionless'}' file",
            hint=f"{_WHAT_A_PLAN_IS}; rename the file if it holds YAML or JSON",
        ))
    if suffix == ".py":
        return _load_python(file, label)
    text = _read_text(file, label)
    if suffix == ".json":
        return _load_json(text, label)
    return _load_yaml(text, label)


def _fail(label: str, *problems: Problem) -> NoReturn:
    raise PlanInvalid(list(problems), source=label)


def _read_text(file: Path, label: str) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return _fail(label, Problem(
            label,
            f"is not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start})",
            hint="save the file as UTF-8",
        ))
    except OSError as error:
        return _fail(label, Problem(
            label,
            f"cannot be read: {error.strerror or error}",
            hint="check that the file exists and that you may read it",
        ))


# --- YAML --------------------------------------------------------------------------------------


def _yaml() -> YAML:
    # The round-trip loader keeps each key's line (``.lc``) and refuses duplicate keys.
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def _load_yaml(text: str, label: str) -> Plan:
    try:
        document = _yaml().load(text)
    except MarkedYAMLError as error:
        return _fail(label, _yaml_syntax_problem(error, label))
    except YAMLError as error:
        return _fail(label, Problem(label, f"is not valid YAML: {error}", hint=_YAML_HINT))
    if document is None:
        return _fail(label, Problem(
            label,
            "the file holds no plan (it is empty)",
            hint="start from examples/quickstart/plan.yaml",
        ))
    return _validate_located(_plain(document), document, label)


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


def _validate_located(data: Any, document: Any, label: str) -> Plan:
    try:
        return Plan.model_validate(data)
    except ValidationError as error:
        located = [(issue, _line_of(document, issue.loc)) for issue in describe_validation_error(error)]
        # In the order of the file: by line, then (on one line) by place in the data.
        located.sort(key=lambda pair: (pair[1] or 0, input_order(data, pair[0].loc)))
        raise PlanInvalid(
            [_issue_problem(issue, label, line) for issue, line in located], source=label
        ) from None


def _issue_problem(issue: PlanIssue, label: str, line: int | None) -> Problem:
    return Problem(_located(label, line, issue.path), issue.message, hint=issue.hint)


# --- JSON --------------------------------------------------------------------------------------


def _load_json(text: str, label: str) -> Plan:
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
        return _fail(label, Problem(
            f"{label}:{error.lineno}:{error.colno}",
            f"JSON syntax error: {error.msg}",
            hint="look for a missing or extra comma, quote or bracket at this point or just "
            "before it (JSON allows no comments and no trailing commas)",
        ))
    # JSON is YAML 1.2 flow style: ruamel gives line numbers when it can read the text.
    document = _json_lines(text)
    if duplicates:
        return _fail(label, *[
            Problem(
                _duplicate_location(label, document, key),
                f"duplicate key '{key}'",
                hint="a key may appear only once in an object; remove or rename one of them",
            )
            for key in duplicates
        ])
    return _validate_located(data, document, label)


def _json_lines(text: str) -> Any:
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


def _load_python(file: Path, label: str) -> Plan:
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
        spec.loader.exec_module(module)
    except PlanInvalid:
        raise
    except ValidationError as error:
        line = _line_in_traceback(error, resolved)
        return _fail(label, *[
            Problem(
                _located(label, line, _qualified(error.title, issue.path)),
                issue.message,
                hint=issue.hint,
            )
            for issue in describe_validation_error(error)
        ])
    except SyntaxError as error:
        where = f"{label}:{error.lineno}" if error.lineno else label
        return _fail(label, Problem(where, f"Python syntax error: {error.msg}", hint=_PY_HINT))
    except (Exception, SystemExit) as error:  # noqa: BLE001 - any failure of user code is reported
        line = _line_in_traceback(error, resolved)
        where = f"{label}:{line}" if line is not None else label
        return _fail(label, Problem(
            where,
            f"{type(error).__name__}: {error}",
            hint="fix the module: it runs each time the plan is loaded",
        ))
    finally:
        sys.modules.pop(module_name, None)
        try:
            sys.path.remove(str(resolved.parent))
        except ValueError:
            pass
    if not hasattr(module, "plan"):
        return _fail(label, Problem(
            label,
            "the module defines no `plan`",
            hint="define a module-level `plan = Plan(...)` (from horde.plan import Plan), "
            "or `plan = {...}` as a dict",
        ))
    plan = module.plan
    if isinstance(plan, Plan):
        # Checked again: a Plan changed after it was built is not validated by pydantic.
        return plan_from_dict(plan.model_dump(), source=label)
    if isinstance(plan, dict):
        return plan_from_dict(plan, source=label)
    return _fail(label, Problem(
        label,
        f"`plan` is a {type(plan).__name__}, not a Plan",
        hint="define a module-level `plan = Plan(...)` (from horde.plan import Plan), "
        "or `plan = {...}` as a dict",
    ))


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
