"""The bench's documents stay joined to its scripts: every figure block a bench/*.py script
writes has its markers exactly once in bench/FIGURES.md, under a heading the scripts name, and
the relative links of bench/*.md (and those into them from the repository's documents) lead to a
file and heading that exist. Reads the scripts' source; runs no benchmark."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
from itertools import pairwise
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
FIGURES = BENCH / "FIGURES.md"
MARKER = re.compile(r"^<!-- ([A-Za-z0-9:_-]+):(begin|end) -->$", flags=re.MULTILINE)
WRITER = "write_readme_block"


def markers() -> dict[str, list[tuple[str, int]]]:
    """Each block name in FIGURES.md with its markers' kinds and offsets, in order."""
    found: dict[str, list[tuple[str, int]]] = {}
    for match in MARKER.finditer(FIGURES.read_text()):
        found.setdefault(match.group(1), []).append((match.group(2), match.start()))
    return found


def leading_text(node: ast.AST, module: ast.Module) -> str:
    """The constant text a block name starts with: the name itself when it is a literal; the
    first literal part of an f-string, a `+` chain, a conditional's two sides or a local
    function's return otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        first = node.values[0]
        return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    if isinstance(node, ast.BinOp):
        return leading_text(node.left, module)
    if isinstance(node, ast.IfExp):
        either = (leading_text(node.body, module), leading_text(node.orelse, module))
        return either[0][: len(os.path.commonprefix(either))]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        for function in ast.walk(module):
            if isinstance(function, ast.FunctionDef) and function.name == node.func.id:
                returned = [n.value for n in ast.walk(function) if isinstance(n, ast.Return) and n.value]
                return leading_text(returned[0], module) if returned else ""
    if isinstance(node, ast.Name):
        for assign in ast.walk(module):
            if isinstance(assign, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in assign.targets
            ):
                return leading_text(assign.value, module)
    return ""


def written_blocks() -> dict[str, tuple[str, bool]]:
    """Per script, the block names it writes: (the name, or the text every such name starts
    with; whether it is exact). Also the `section=` headings they name, keyed by `§heading`."""
    blocks: dict[str, tuple[str, bool]] = {}
    for script in sorted(BENCH.glob("*.py")):
        module = ast.parse(script.read_text())
        for call in ast.walk(module):
            if not isinstance(call, ast.Call):
                continue
            callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            names: list[ast.AST] = []
            if callee == WRITER and call.args:
                names.append(call.args[0])
            names += [kw.value for kw in call.keywords if kw.arg == "block"]
            for name in names:
                if isinstance(name, ast.Name) and script.name == "harness.py":
                    continue  # side_by_side_main's parameter: its callers' `block=` is counted
                text = leading_text(name, module)
                assert text, f"{script.name}:{call.lineno}: a block name this test cannot read"
                exact = isinstance(name, ast.Constant)
                blocks[f"{script.name}:{call.lineno}:{text}"] = (text, exact)
            for kw in call.keywords:
                if kw.arg == "section" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    blocks[f"§{kw.value.value}"] = (kw.value.value, True)
    return blocks


def test_every_marker_is_a_pair_exactly_once() -> None:
    found = markers()
    assert found, "no figure block in bench/FIGURES.md"
    for name, kinds in found.items():
        assert [kind for kind, _ in kinds] == ["begin", "end"], f"{name}: {kinds}"
    spans = sorted((kinds[0][1], kinds[1][1], name) for name, kinds in found.items())
    for (_, end, name), (begin, _, following) in pairwise(spans):
        assert end < begin, f"blocks {name} and {following} overlap"


def test_every_block_a_script_writes_is_in_figures() -> None:
    found = set(markers())
    headings = set(re.findall(r"^## (.+)$", FIGURES.read_text(), flags=re.MULTILINE))
    claimed: set[str] = set()
    for where, (text, exact) in written_blocks().items():
        if where.startswith("§"):
            assert text in headings, f"section {text!r} named by a script is no heading of FIGURES.md"
            continue
        matching = {name for name in found if name == text or (not exact and name.startswith(text))}
        assert matching, f"{where}: no block {'named' if exact else 'starting with'} {text!r} in FIGURES.md"
        claimed |= matching
    assert found == claimed, f"blocks no script writes: {sorted(found - claimed)}"


def test_scripts_write_to_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("harness", None)
    # bench/ is no package: its scripts import the harness by path, as this does.
    harness = importlib.import_module("harness")

    assert harness.FIGURES == FIGURES
    # A rewrite replaces its block and leaves the rest of the file as it was.
    copy = tmp_path / "FIGURES.md"
    copy.write_text(FIGURES.read_text())
    monkeypatch.setattr(harness, "FIGURES", copy)
    harness.write_readme_block("link", "new figures\n", section="The emulated link")
    before, after = FIGURES.read_text(), copy.read_text()
    head, _, rest = before.partition("<!-- link:begin -->\n")
    assert after == head + "<!-- link:begin -->\nnew figures\n" + rest[rest.index("<!-- link:end -->") :]
    # A new block (another machine's `--tag`) goes at the end of its benchmark's section.
    harness.write_readme_block("link-16cpu", "other figures\n", section="The emulated link")
    sections = re.split(r"^(?=## )", copy.read_text(), flags=re.MULTILINE)
    link = next(s for s in sections if s.startswith("## The emulated link\n"))
    assert link.endswith("<!-- link-16cpu:begin -->\nother figures\n<!-- link-16cpu:end -->\n\n")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize(
    "document",
    [
        "bench/README.md",
        "bench/FIGURES.md",
        "bench/NOTES.md",
        "README.md",
        "ARCHITECTURE.md",
        *[str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md"))],
    ],
)
def test_links_into_bench_resolve(document: str) -> None:
    path = REPO / document
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # another site
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not document.startswith("bench/") and BENCH not in linked.parents:
            continue  # only links into bench/ are this test's
        assert linked.exists(), f"{document}: {target} leads to no file"
        if anchor and linked.suffix == ".md":
            anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.MULTILINE)}
            assert anchor in anchors, f"{document}: {target} leads to no heading of {linked.name}"
