"""What a conversion did with each part of its source, and where that part is.

Every element a converter meets ends in one :class:`Finding`: ``converted`` (the plan does what
the source did), ``approximated`` (the plan does something close, and the note says how it
differs) or ``not converted`` (the plan leaves it out, and the note says what the plan does
instead; the written plan carries a marked comment at the place the element would have gone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Outcome(StrEnum):
    CONVERTED = "converted"
    APPROXIMATED = "approximated"
    NOT_CONVERTED = "not converted"


#: Where in the written plan a finding's comment goes: the keys and list indexes from the plan's
#: root to the part it concerns, e.g. ``("scenarios", 0, "steps", 3)``; empty for the plan itself.
PlanPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    """One element of the source and what became of it."""

    outcome: Outcome
    #: ``file:line`` where the source format has lines (a .jmx, an ammo file, a tank config), or
    #: ``file: path inside the document`` where it has none (a HAR's ``log.entries[12]``).
    location: str
    #: The source's own name for the element: ``JSR223PreProcessor 'sign request'``.
    element: str
    #: What became of it: the plan's part, how an approximation differs, or what the plan does
    #: instead of an element it could not convert (with the first lines of code it could not read).
    note: str
    #: Where the plan holds it (or the marked comment of what it could not hold).
    plan_path: PlanPath = ()


@dataclass
class Conversion:
    """A source converted: the Horde plan document and a finding for every element met."""

    source: Path
    #: ``jmeter``, ``tank`` or ``har``.
    source_format: str
    #: The Horde plan as a document (what ``plan_from_dict`` reads); it validates.
    plan: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    #: Files the plan reads (a feeder of requests), by their path relative to the plan's folder,
    #: with their text: written beside the plan.
    files: dict[str, str] = field(default_factory=dict)

    def add(self, outcome: Outcome, location: str, element: str, note: str, plan_path: PlanPath = ()) -> None:
        self.findings.append(Finding(outcome, location, element, note, plan_path))

    def of(self, outcome: Outcome) -> list[Finding]:
        return [finding for finding in self.findings if finding.outcome is outcome]
