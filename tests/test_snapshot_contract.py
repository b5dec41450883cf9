"""The snapshot is the second contract between Python and the engine (the plan is the first): the
engine's struct (``crates/horde-engine/src/snapshot.rs``) defines its fields, the TypedDicts of
``horde.engine.snapshot`` type them for Python. The two are compared here, field by field, so
that a counter added to one and not the other fails a test rather than a reader."""

from __future__ import annotations

import re
from pathlib import Path

from horde.engine.snapshot import ADDED_IN_PYTHON, SENT_WHEN_SET, Snapshot, StepSnapshot

SNAPSHOT_RS = Path(__file__).resolve().parents[1] / "crates" / "horde-engine" / "src" / "snapshot.rs"
#: A field with its serde attributes: `#[serde(...)]` lines, then `pub NAME:`.
FIELD = re.compile(r"((?:^\s*#\[serde\((?:[^\]]*)\)\]\n)*)^\s*pub (\w+):", re.MULTILINE)


def rust_keys(struct: str, source: str | None = None) -> dict[str, str]:
    """The ``pub`` fields of a struct in snapshot.rs, by the key Python reads them under (a
    serde ``rename``, or the name), with their serde attributes."""
    source = SNAPSHOT_RS.read_text(encoding="utf-8") if source is None else source
    body = re.search(rf"pub struct {struct} \{{(.*?)\n\}}", source, re.DOTALL)
    assert body, struct
    keys = {}
    for attributes, name in FIELD.findall(body.group(1)):
        renamed = re.search(r'rename = "(\w+)"', attributes)
        keys[renamed.group(1) if renamed else name] = attributes
    return keys


def rust_fields(struct: str, source: str | None = None) -> set[str]:
    return set(rust_keys(struct, source))


def sent_when_set(struct: str) -> set[str]:
    return {key for key, attributes in rust_keys(struct).items() if "skip_serializing_if" in attributes}


def typed_keys(typed: type) -> set[str]:
    return set(typed.__required_keys__) | set(typed.__optional_keys__)  # type: ignore[attr-defined]


def test_the_second_has_the_engines_fields_and_only_python_adds_the_rest() -> None:
    assert rust_fields("Snapshot") == typed_keys(Snapshot) - ADDED_IN_PYTHON


def test_a_step_has_the_engines_fields() -> None:
    assert rust_fields("StepSnapshot") == typed_keys(StepSnapshot)


def test_what_the_engine_sends_only_when_set_is_its_own() -> None:
    assert SENT_WHEN_SET == sent_when_set("Snapshot") | sent_when_set("StepSnapshot")
    assert "final" in rust_fields("Snapshot") and "is_final" not in rust_fields("Snapshot")
    assert not ADDED_IN_PYTHON & (rust_fields("Snapshot") | rust_fields("StepSnapshot"))


def test_the_comparison_sees_a_field_missing_on_one_side() -> None:
    # A counter added to the engine only: the comparison names it.
    changed = SNAPSHOT_RS.read_text(encoding="utf-8").replace(
        "    pub h2_stalls: u64,", "    pub h2_stalls: u64,\n    pub h3: u64,"
    )
    assert rust_fields("StepSnapshot", changed) - typed_keys(StepSnapshot) == {"h3"}
