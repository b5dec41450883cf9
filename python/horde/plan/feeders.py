"""Feeder files, checked before any request is sent: the file can be read, a CSV has a header
row and rows of as many fields, a JSONL file has one JSON object a line (the first
:data:`ROWS_CHECKED` rows are read), and a ``unique`` feeder has a row for every VU.

The engine reads the files again when the run starts; these checks make a bad file a located
plan problem instead of a failed run. Both sides read files the same way: UTF-8 (a leading byte
order mark is skipped), blank lines skipped, CSV as RFC 4180 (fields may be quoted, a quoted
field may hold commas and line breaks).
"""

from __future__ import annotations

import csv
import difflib
import functools
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from horde.plan.model import Plan
from horde.plan.workloads import peak_vus

__all__ = [
    "MAX_COUNTED_BYTES",
    "ROWS_CHECKED",
    "FeederFault",
    "check_feeder_file",
    "count_rows",
    "feeder_columns",
    "unknown_column_faults",
    "unique_feeder_faults",
]

#: How many rows of a feeder file are checked before a run (the engine reports later bad rows).
ROWS_CHECKED = 100

#: A unique feeder's rows are counted before the run when its file is at most this large;
#: beyond, a VU that finds no row left counts a ``feeder_exhausted`` error during the run.
MAX_COUNTED_BYTES = 1 << 30


@dataclass(frozen=True)
class FeederFault:
    """What is wrong with a feeder file, and what to do about it."""

    message: str
    hint: str


def _looks_like_a_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_csv(path: str) -> FeederFault | None:
    with open(path, encoding="utf-8-sig", newline="") as file:
        reader = csv.reader(file, strict=True)
        header: list[str] | None = None
        rows = 0
        try:
            for record in reader:
                if not record or record == [""]:
                    continue
                if header is None:
                    header = record
                    fault = _check_header(header, reader.line_num)
                    if fault is not None:
                        return fault
                    continue
                if len(record) != len(header):
                    return FeederFault(
                        f"line {reader.line_num} has {len(record)} field(s); the header row has {len(header)}",
                        "give every row one value per header field; quote a value that holds a "
                        "comma, e.g. \"Paris, France\"",
                    )
                rows += 1
                if rows >= ROWS_CHECKED:
                    break
        except csv.Error as error:
            return FeederFault(
                f"line {reader.line_num} is not valid CSV: {error}",
                "close every quoted field with '\"', and write a '\"' inside one as '\"\"'",
            )
    if header is None:
        return FeederFault("is empty", "a CSV feeder starts with a header row naming the fields, e.g. login,password")
    if rows == 0:
        return FeederFault("has a header row but no rows", "add at least one row of data under the header")
    return None


def _check_header(header: list[str], line: int) -> FeederFault | None:
    names = [name.strip() for name in header]
    for index, name in enumerate(names):
        if not name:
            return FeederFault(
                f"the header row (line {line}) has an empty field name (field {index + 1})",
                "name every field in the first row, e.g. login,password",
            )
        if _looks_like_a_number(name):
            return FeederFault(
                f"the first row (line {line}) looks like data, not a header: field '{name}' is a number",
                "add a header row naming the fields as the first line, e.g. login,password",
            )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        return FeederFault(
            f"the header row (line {line}) names field '{duplicates[0]}' twice",
            "give each field its own name: rows are read as {name: value}",
        )
    return None


def _check_jsonl(path: str) -> FeederFault | None:
    rows = 0
    with open(path, encoding="utf-8-sig") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                return FeederFault(
                    f"line {number} is not valid JSON: {error.msg} (column {error.colno})",
                    "write one JSON object a line, e.g. {\"login\": \"ann\", \"password\": \"x\"}",
                )
            except (RecursionError, ValueError) as error:
                return FeederFault(
                    f"line {number} cannot be read: "
                    + ("it nests too deep" if isinstance(error, RecursionError) else str(error)),
                    "a row is one flat JSON object of a few fields, e.g. {\"login\": \"ann\"}",
                )
            if not isinstance(row, dict):
                return FeederFault(
                    f"line {number} is not a JSON object (it is {type(row).__name__ if row is not None else 'null'})",
                    "write one JSON object a line, e.g. {\"login\": \"ann\"}: its keys are the row's fields",
                )
            rows += 1
            if rows >= ROWS_CHECKED:
                break
    if rows == 0:
        return FeederFault("has no rows", "write one JSON object a line, e.g. {\"login\": \"ann\"}")
    return None


def check_feeder_file(path: str, format: str) -> FeederFault | None:
    """The first problem of a feeder file (its first :data:`ROWS_CHECKED` rows), or None."""
    if not os.path.exists(path):
        return FeederFault(
            "no such file",
            "feeder paths are relative to the plan file's folder; check the name and the folder",
        )
    if os.path.isdir(path):
        return FeederFault("is a directory, not a file", "give the data file's path, e.g. data/users.csv")
    try:
        return _check_csv(path) if format == "csv" else _check_jsonl(path)
    except UnicodeDecodeError as error:
        return FeederFault(
            f"is not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start})",
            "save the file as UTF-8",
        )
    except OSError as error:
        return FeederFault(
            f"cannot be read: {error.strerror or error}",
            "check that the file exists and that you may read it",
        )


@functools.lru_cache(maxsize=64)
def _count(path: str, format: str, size: int, mtime_ns: int) -> int:
    if format == "csv":
        with open(path, encoding="utf-8-sig", newline="") as file:
            records = sum(1 for record in csv.reader(file) if record and record != [""])
        return max(records - 1, 0)  # the header row
    with open(path, "rb") as binary:
        return sum(1 for line in binary if line.strip())


def count_rows(path: str, format: str) -> int | None:
    """How many rows a feeder file holds (header excluded); None when it is larger than
    :data:`MAX_COUNTED_BYTES` or cannot be read. Counted once per version of the file."""
    try:
        status = os.stat(path)
        if status.st_size > MAX_COUNTED_BYTES:
            return None
        return _count(path, format, status.st_size, status.st_mtime_ns)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def unique_feeder_faults(plan: Plan) -> list[tuple[int, int, FeederFault]]:
    """Each ``unique`` feeder with fewer rows than its scenario's peak VUs, as
    (scenario index, feeder index, fault)."""
    faults: list[tuple[int, int, FeederFault]] = []
    for s_index, scenario in enumerate(plan.scenarios):
        for f_index, feeder in enumerate(scenario.feeders):
            if feeder.mode != "unique":
                continue
            rows = count_rows(feeder.path, feeder.format)
            peak = peak_vus(scenario.workload)
            if rows is not None and rows < peak:
                faults.append(
                    (
                        s_index,
                        f_index,
                        FeederFault(
                            f"unique feeder '{feeder.name}' has {rows} row(s) but scenario "
                            f"'{scenario.name}' runs up to {peak} VUs; each VU needs its own row",
                            "add rows, lower the VUs (stages, start_vus or max_vus), or use mode circular or random",
                        ),
                    )
                )
    return faults


def feeder_columns(path: str, format: str) -> list[str] | None:
    """The fields a feeder's rows have: a CSV's header, the keys of a JSONL file's first object;
    None when the file cannot be read (:func:`check_feeder_file` says why)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as file:
            if format == "csv":
                for record in csv.reader(file):
                    if record and record != [""]:
                        return record
                return None
            for line in file:
                if line.strip():
                    row = json.loads(line)
                    return [str(key) for key in row] if isinstance(row, dict) else None
    except (OSError, UnicodeDecodeError, csv.Error, RecursionError, ValueError):
        return None
    return None


#: A template's expression or statement: ``{{ users.login }}``, ``{% if users.admin %}``.
_TEMPLATE_PART = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)


def _strings(node: Any, loc: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    if isinstance(node, str):
        return [(loc, node)]
    if isinstance(node, dict):
        return [found for key, value in node.items() for found in _strings(value, (*loc, key))]
    if isinstance(node, list):
        return [found for index, item in enumerate(node) for found in _strings(item, (*loc, index))]
    return []


def unknown_column_faults(plan: Plan) -> list[tuple[tuple[str | int, ...], FeederFault]]:
    """Each template that reads a field its feeder's rows do not have (``{{ users.logn }}``
    against a header ``id,login,password``), located at the string that holds it. The engine
    would render it at run time and count ``template_failed`` for every request."""
    faults: list[tuple[tuple[str | int, ...], FeederFault]] = []
    for s_index, scenario in enumerate(plan.scenarios):
        columns = {feeder.name: feeder_columns(feeder.path, feeder.format) for feeder in scenario.feeders}
        known = {name: fields for name, fields in columns.items() if fields is not None}
        if not known:
            continue
        reference = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, known)) + r")\.([A-Za-z_][A-Za-z0-9_]*)")
        data = scenario.model_dump(mode="json", by_alias=True)
        for part in ("setup", "steps", "teardown"):
            for loc, text in _strings(data.get(part), ("scenarios", s_index, part)):
                for match in _TEMPLATE_PART.finditer(text):
                    for name, field in reference.findall(match.group(1) or match.group(2) or ""):
                        if field in known[name]:
                            continue
                        close = difflib.get_close_matches(field, known[name], n=1)
                        faults.append(
                            (
                                loc,
                                FeederFault(
                                    f"'{name}.{field}': feeder '{name}' has no field '{field}'",
                                    (f"did you mean '{name}.{close[0]}'? " if close else "")
                                    + f"its rows have: {', '.join(known[name])}",
                                ),
                            )
                        )
    return faults
