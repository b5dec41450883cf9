"""A conversion written as the plan's YAML text, commented so that nothing of the source is lost
from sight.

The header says where the plan came from (the source file and its format), how many elements
were converted, approximated and not converted, and how to check the plan (``horde validate``).
Each finding that is not plainly converted gets a marked comment just before the part of the plan
it concerns (its ``plan_path``), in the words a reader greps for::

    # APPROXIMATED (load.yaml:12): autostop http(5xx,10%,5s): ...
    # NOT CONVERTED (test.jmx:88): JSR223PreProcessor 'sign': ...

A path the plan does not hold (an element left out, where it would have gone) puts its comment at
the nearest part the plan holds. Comments never change the plan: the text loads
(:func:`horde.plan.loader.load_plan`) to the plan the conversion holds.
"""

from __future__ import annotations

import io
import textwrap
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from horde.conversion.findings import Conversion, Finding, Outcome

#: The mark each outcome's comment starts with (the converted ones get none: the plan says it).
MARKS = {Outcome.APPROXIMATED: "APPROXIMATED", Outcome.NOT_CONVERTED: "NOT CONVERTED"}
#: Comment lines wrap at this width (a note can be long: code's first lines, a difference).
WIDTH = 110
# ruamel's layout for the plan: a mapping's keys 2 deeper than their parent's, a list's dash 2
# deeper than its key and its items' keys 2 past the dash, so comments can be indented to match.
_MAPPING, _SEQUENCE, _OFFSET = 2, 4, 2


def header_lines(conversion: Conversion, written_as: str | None = None) -> list[str]:
    """The header comment's lines, without ``#``."""
    counts = {outcome: len(conversion.of(outcome)) for outcome in Outcome}
    lines = [
        f"Converted by `horde import` from {conversion.source.name} ({conversion.source_format}).",
        (
            f"{counts[Outcome.CONVERTED]} converted, {counts[Outcome.APPROXIMATED]} approximated, "
            f"{counts[Outcome.NOT_CONVERTED]} not converted."
        ),
    ]
    if counts[Outcome.APPROXIMATED] or counts[Outcome.NOT_CONVERTED]:
        lines.append("Search this file for APPROXIMATED and NOT CONVERTED: each says where in the source it was and")
        lines.append("what the plan does instead.")
    parameters = conversion.plan.get("parameters") or {}
    given = [name for name, default in parameters.items() if default == ""]
    if given:
        lines.append("Parameters left for you to give (a secret the source held is never written here):")
        lines += [f"  -p {name}=...  (or the environment's HORDE_PARAM_{name.upper()})" for name in given]
    lines.append(f"Check it before a run: horde validate {written_as or conversion.source.stem + '.yaml'}")
    return lines


def comment_text(finding: Finding) -> str:
    return f"{MARKS[finding.outcome]} ({finding.location}): {finding.element}: {finding.note}"


def plan_yaml(conversion: Conversion, written_as: str | None = None) -> str:
    """The plan of ``conversion`` as commented YAML text; ``written_as``: the file's name, for
    the header's ``horde validate`` line."""
    document = _commented(conversion.plan)
    assert isinstance(document, CommentedMap)
    for finding in conversion.findings:
        if finding.outcome in MARKS:
            _attach(document, finding.plan_path, comment_text(finding))
    document.yaml_set_start_comment("\n".join(header_lines(conversion, written_as)))
    yaml = YAML()
    yaml.indent(mapping=_MAPPING, sequence=_SEQUENCE, offset=_OFFSET)
    yaml.width = 4096  # a step's path or header stays on its line however long
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def _commented(node: Any) -> Any:
    if isinstance(node, dict):
        mapping = CommentedMap()
        for key, value in node.items():
            mapping[key] = _commented(value)
        return mapping
    if isinstance(node, list):
        return CommentedSeq([_commented(item) for item in node])
    return node


def _attach(document: CommentedMap, path: tuple[str | int, ...], text: str) -> None:
    """Puts ``text`` as comment lines before the part at ``path`` (or the nearest one held)."""
    node: Any = document
    column = 0
    key: str | int | None = None
    container: Any = None
    key_column = 0
    for part in path:
        # ``column``: where the children of ``node`` start (a mapping's keys, a list's dashes).
        if isinstance(node, CommentedMap) and part in node:
            container, key, key_column = node, part, column
            node = node[part]
            column += _OFFSET if isinstance(node, CommentedSeq) else _MAPPING
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
            container, key, key_column = node, part, column
            node = node[part]
            column += _SEQUENCE - _OFFSET
        else:
            # A part the plan does not hold (an element left out where it would have gone, past
            # a list's end): the comment goes before the deepest part it holds (the list itself).
            break
    if container is None:
        # The plan itself, or a path whose first part the plan does not hold: before the first key.
        first = next(iter(document))
        _before(document, first, text, 0)
        return
    assert key is not None
    _before(container, key, text, key_column)


def _before(container: CommentedMap | CommentedSeq, key: str | int, text: str, column: int) -> None:
    lines = textwrap.wrap(text, WIDTH - column, subsequent_indent="  ", break_on_hyphens=False) or [text]
    existing = container.ca.items.get(key)
    if existing and existing[1]:
        # A comment is already there: add these lines below it, at its indentation.
        tokens = existing[1]
        previous = "".join(token.value for token in tokens)
        container.ca.items[key][1] = None
        container.yaml_set_comment_before_after_key(
            key, before=_uncommented(previous) + "\n" + "\n".join(lines), indent=column
        )
        return
    container.yaml_set_comment_before_after_key(key, before="\n".join(lines), indent=column)


def _uncommented(text: str) -> str:
    return "\n".join(line.strip().removeprefix("#").removeprefix(" ") for line in text.strip("\n").splitlines())
