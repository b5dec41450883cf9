"""A JMeter test plan's XML, read safely and with the line of every element.

A .jmx is untrusted input (a plan from another team, a download): it is read by expat with no
document type allowed, so no entity is ever declared (no billion-laughs expansion, no external
entity fetched), within bounds of size, depth and element count. Each element keeps the line its
start tag is on, so that every finding says ``file:line``. Anything that is not a well-formed
JMeter plan is an :class:`~horde.errors.InvalidInput` located at its line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from horde.errors import InvalidInput

#: The largest .jmx read: the biggest real plans are a few MB (recorded sessions with bodies).
MAX_BYTES = 32 * 1024 * 1024
#: A JMeter tree nests a few levels per controller; 200 is far past any real plan.
MAX_DEPTH = 200
MAX_ELEMENTS = 1_000_000

_HINT = "give a test plan JMeter saved (File > Save Test Plan as), a .jmx file"


@dataclass
class Node:
    """One XML element: its tag, attributes, the line of its start tag, children and text."""

    tag: str
    attrs: dict[str, str]
    line: int
    children: list[Node] = field(default_factory=list)
    text: str = ""

    @property
    def name(self) -> str:
        """JMeter's name of the element (``testname``), else its tag."""
        return self.attrs.get("testname") or self.tag

    @property
    def kind(self) -> str:
        """The element's class without its package: ``ThreadGroup``, ``UltimateThreadGroup``."""
        return (self.attrs.get("testclass") or self.tag).rsplit(".", 1)[-1]

    @property
    def enabled(self) -> bool:
        return self.attrs.get("enabled", "true").strip().lower() != "false"

    def prop(self, name: str, default: str = "") -> str:
        """The text of the property named ``name`` (``stringProp``, ``intProp``, a
        ``FloatProperty``...), among the element's own properties."""
        found = self.prop_node(name)
        if found is None:
            return default
        for child in found.children:  # FloatProperty, doubleProp: <name>, <value>, <savedValue>
            if child.tag == "value":
                return child.text.strip()
        return found.text.strip()

    def prop_node(self, name: str) -> Node | None:
        for child in self.children:
            if child.attrs.get("name") == name:
                return child
            if any(c.tag == "name" and c.text.strip() == name for c in child.children):
                return child
        return None

    def collection(self, name: str) -> list[Node]:
        """The items of the ``collectionProp`` named ``name`` (empty when it has none)."""
        found = self.prop_node(name)
        if found is None:
            for child in self.children:  # an elementProp's collection sits one level down
                if child.tag == "elementProp":
                    inner = child.prop_node(name)
                    if inner is not None:
                        return inner.children
            return []
        return found.children


def parse_jmx(data: bytes, label: str) -> Node:
    """The document's root element; bad XML is an InvalidInput at ``label:line``."""
    if len(data) > MAX_BYTES:
        raise InvalidInput(
            f"{label}: {len(data):,} bytes is larger than the {MAX_BYTES:,} a test plan may have",
            hint="split the plan (Include Controllers read the parts), or remove recorded response bodies",
        )
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[Node] = []
    roots: list[Node] = []
    count = 0

    def refuse(what: str) -> None:
        raise InvalidInput(
            f"{label}:{parser.CurrentLineNumber}: {what} is not read in a test plan",
            hint="JMeter never writes one: remove it (entities could expand without bound or read other files)",
        )

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal count
        count += 1
        if len(stack) >= MAX_DEPTH or count > MAX_ELEMENTS:
            raise InvalidInput(
                f"{label}:{parser.CurrentLineNumber}: the XML nests deeper than {MAX_DEPTH} levels "
                f"or holds more than {MAX_ELEMENTS:,} elements",
                hint=_HINT,
            )
        node = Node(tag, dict(attrs), parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def text(data: str) -> None:
        if stack:
            stack[-1].text += data

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.StartDoctypeDeclHandler = lambda *args: refuse("a document type (DOCTYPE)")
    parser.EntityDeclHandler = lambda *args: refuse("an entity declaration")
    parser.ExternalEntityRefHandler = lambda *args: refuse("an external entity")  # type: ignore[assignment]
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise InvalidInput(
            f"{label}:{error.lineno}: not well-formed XML ({expat.errors.messages[error.code]}, column {error.offset + 1})",
            hint=_HINT,
        ) from None
    except (LookupError, ValueError) as error:
        # The XML declaration names an encoding Python does not know, or expat cannot read
        # (multi-byte ones), or whose codec fails (UnicodeError is a ValueError).
        raise InvalidInput(
            f"{label}:1: cannot read its encoding ({error})", hint="save the plan as UTF-8, as JMeter does"
        ) from None
    except RecursionError:  # pragma: no cover - the depth bound stops first
        raise InvalidInput(f"{label}: the XML nests too deep", hint=_HINT) from None
    if not roots or roots[0].tag != "jmeterTestPlan":
        found = roots[0].tag if roots else "nothing"
        raise InvalidInput(
            f"{label}:{roots[0].line if roots else 1}: not a JMeter test plan (its root element is '{found}', "
            "not 'jmeterTestPlan')",
            hint=_HINT,
        )
    return roots[0]


def read_jmx(path: Path, label: str) -> Node:
    """Reads and parses ``path`` (bounded: a larger file is refused before it is read whole)."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise InvalidInput(
            f"{label}: cannot read the test plan ({error.strerror or error})", hint="check the path and its permissions"
        ) from None
    return parse_jmx(data, label)


def pairs(hash_tree: Node | None) -> Iterator[tuple[Node, Node | None]]:
    """The elements of a ``hashTree`` with the ``hashTree`` of each one's children (JMeter writes
    an element, then its children's tree, side by side)."""
    if hash_tree is None:
        return
    children = hash_tree.children
    index = 0
    while index < len(children):
        element = children[index]
        subtree = None
        if index + 1 < len(children) and children[index + 1].tag == "hashTree":
            subtree = children[index + 1]
            index += 1
        index += 1
        if element.tag != "hashTree":
            yield element, subtree


def walk(hash_tree: Node | None) -> Iterator[Node]:
    """Every element of a tree, depth first, in document order."""
    for element, subtree in pairs(hash_tree):
        yield element
        yield from walk(subtree)
