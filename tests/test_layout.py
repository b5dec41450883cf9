"""The layout ARCHITECTURE.md promises, checked on the source: which layer may import which, no
import circles between modules, and imports inside functions only where a heavy optional part
is loaded on demand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "horde"
ENGINE_SOURCE = Path(__file__).resolve().parents[1] / "crates" / "horde-engine" / "src"

#: Packages the plan layer never imports: a plan is data, checked before anything runs.
ABOVE_THE_PLAN = (
    "horde.engine",
    "horde.control",
    "horde.monitors",
    "horde.sinks",
    "horde.results",
    "horde.cli",
    "horde.web",
    "horde.report",
    "horde.store",
    "horde.cluster",
)
#: The plan modules that read the engine's plan contract (its bounds) from the native module:
#: the engine owns the plan's rules (engine_rules) and bounds (bounds), so the plan layer asks it
#: rather than keep a copy; and what names a secret (redaction), the rule the engine redacts
#: recorded exchanges by; and the rules the types ask as a plan is built (build_rules).
PLAN_ASKS_THE_ENGINE = (
    "horde.plan.bounds",
    "horde.plan.engine_rules",
    "horde.plan.redaction",
    "horde.plan.build_rules",
)

#: Imports inside functions that are there on purpose: (importing module, imported module).
LOADED_ON_DEMAND = {
    # The control package names the conductor's types but loads it (and the store) when asked.
    ("horde.control", "horde.control.conductor"),
    # The profile's HTML page brings the report's machinery; `horde profile --html` loads it.
    ("horde.profile", "horde.profile.page"),
    # The postgres source brings psycopg; only a run with a postgres monitor loads it.
    ("horde.monitors.sampler", "horde.monitors.postgres"),
    # The sighting block's declaration, for mypy only: `horde --help` loads the sight module,
    # and the results package (with the store) it does not need.
    ("horde.control.sight", "horde.results.summary_blocks"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> list[tuple[str, bool]]:
    """Every horde module ``path`` imports, and whether the import is at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    at_top = {id(node) for node in tree.body}
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from horde.x import y`` imports the module horde.x.y, or a name of horde.x.
            names = [
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name == "horde" or name.startswith("horde."):
                found.append((name, id(node) in at_top))
    return found


def _graph() -> dict[str, dict[str, bool]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, dict[str, bool]] = {}
    for module, path in modules.items():
        edges: dict[str, bool] = {}
        for name, top in _imports(path, set(modules) | {"horde._engine"}):
            # The nearest module that exists (``horde.plan.Plan`` is the module horde.plan).
            while name not in modules and name != "horde._engine" and "." in name:
                name = name.rsplit(".", 1)[0]
            if name != module and (name in modules or name == "horde._engine"):
                edges[name] = edges.get(name, False) or top
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in graph:
                continue
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_only_the_engine_layer_imports_the_native_module() -> None:
    importers = sorted(module for module, edges in _graph().items() if "horde._engine" in edges)
    allowed = [module for module in importers if _is_within(module, "horde.engine") or module in PLAN_ASKS_THE_ENGINE]
    assert importers and allowed == importers, importers


def test_the_plan_layer_imports_nothing_above_it() -> None:
    wrong = [
        (module, target)
        for module, edges in _graph().items()
        if _is_within(module, "horde.plan")
        for target in edges
        if any(_is_within(target, package) for package in ABOVE_THE_PLAN)
    ]
    assert wrong == []


def test_nothing_below_the_cli_imports_it() -> None:
    wrong = [
        (module, target)
        for module, edges in _graph().items()
        if not _is_within(module, "horde.cli")
        for target in edges
        if _is_within(target, "horde.cli")
    ]
    assert wrong == []


def test_no_module_imports_another_that_imports_it_back() -> None:
    assert _cycles(_graph()) == []


def test_imports_inside_functions_are_only_the_ones_loaded_on_demand() -> None:
    # The CLI's commands import their layers when they run, so that `horde --help` and
    # `horde validate` do not pay for the store, the dashboard or the reports.
    inside = {
        (module, target)
        for module, edges in _graph().items()
        for target, top in edges.items()
        if not top and not _is_within(module, "horde.cli")
    }
    assert inside == LOADED_ON_DEMAND


def test_the_checks_see_a_circle_and_a_boundary_crossing() -> None:
    # The checks themselves: a made-up graph with a circle through three modules.
    graph = {"a": {"b": True}, "b": {"c": True}, "c": {"a": False}, "d": {"a": True}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _is_within("horde.engine.run", "horde.engine") and not _is_within("horde.engines", "horde.engine")


#: The layers bottom up, as ARCHITECTURE.md lists them: each imports only layers before it. The
#: package root (``horde``: the builder re-exported, ``__version__``) sits with the plan.
LAYERS = (
    "errors",
    "plan",
    "engine",
    "store",
    "results",
    "cluster",
    "monitors",
    "control",
    "sinks",
    "report",
    "profile",
    "conversion",
    "web",
    "cli",
)


def _layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "plan"
    return LAYERS.index(name) if name in LAYERS else -1


def test_each_layer_imports_only_the_layers_below_it() -> None:
    upward = [
        (module, target)
        for module, edges in _graph().items()
        for target in edges
        if target != "horde._engine" and _layer(target) > _layer(module)
    ]
    assert upward == []
    assert all(_layer(module) >= 0 for module in _graph()), "a package ARCHITECTURE.md does not list"


def test_help_and_validate_load_neither_the_store_nor_the_dashboard_nor_the_reports() -> None:
    # What `horde --help` and `horde validate` cost at start-up is what they import: the plan
    # layer and the engine's check, not SQLAlchemy, Alembic, Starlette, plotly, jinja2 or Ray.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from horde.cli import main\n"
        "main(['--help'])\n"
        "main(['validate', sys.argv[1]])\n"
        "heavy = ('sqlalchemy', 'alembic', 'starlette', 'uvicorn', 'plotly', 'jinja2', 'ray')\n"
        "print('loaded:', ' '.join(name for name in heavy if name in sys.modules))"
    )
    quickstart = PACKAGE.parents[1] / "examples" / "quickstart"
    result = subprocess.run(
        [sys.executable, "-c", probe, str(quickstart)], capture_output=True, text=True, timeout=60, check=False
    )
    assert "valid" in result.stdout, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "loaded:"


# -- the engine crate ----------------------------------------------------------------------------

#: A path through the crate, ``crate::`` then a name or a brace group; the comment that ends a
#: line (``//``, ``///``, ``//!`` after a space or at the start) is not code.
_CRATE_PATH = re.compile(r"\bcrate::(\w+|\{)")
_LINE_COMMENT = re.compile(r"(^|\s)//.*$", re.MULTILINE)


def _brace_group_heads(text: str, start: int) -> list[str]:
    """The first name of each item in the brace group opening at ``text[start]``:
    ``{error::EngineError, think::{VuRandom, Pause}}`` gives ``error``, ``think``."""
    heads, depth, item = [], 0, ""
    for char in text[start:]:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if depth == 1 and char not in "{,":
            item += char
        elif depth == 1 or depth == 0:
            heads.append(item.strip().split("::")[0])
            item = ""
        if depth == 0:
            break
    return [head for head in heads if head]


def _engine_graph(source: Path = ENGINE_SOURCE) -> dict[str, dict[str, bool]]:
    """The engine crate's top-level modules and which others each names through ``crate::``
    (anywhere in its files, tests included)."""
    modules = {path.stem for path in source.glob("*.rs") if path.stem != "lib"}
    modules |= {path.name for path in source.iterdir() if path.is_dir()}
    graph: dict[str, dict[str, bool]] = {module: {} for module in modules}
    for path in source.rglob("*.rs"):
        module = path.relative_to(source).parts[0].removesuffix(".rs")
        if module == "lib":
            continue
        code = _LINE_COMMENT.sub("", path.read_text(encoding="utf-8"))
        for match in _CRATE_PATH.finditer(code):
            names = [match.group(1)] if match.group(1) != "{" else _brace_group_heads(code, match.end() - 1)
            graph[module].update({name: True for name in names if name in modules and name != module})
    return graph


def test_the_engine_crate_has_no_module_circle() -> None:
    # lib.rs promises that the crate's modules depend only downward: no circle through `crate::`.
    # Its folders (time, transport, scenario, run) are top-level modules like the rest.
    graph = _engine_graph()
    assert {"run", "scenario", "transport", "time", "snapshot", "error"} <= set(graph), sorted(graph)
    assert "transport" in graph["scenario"] and "time" in graph["transport"]
    assert not any("run" in named for named in graph.values()), "only the crate root names the run"
    assert _cycles(graph) == []


def _write_sources(folder: Path, files: dict[str, str]) -> None:
    """A crate's source files (path under src/, text) written under ``folder``."""
    for name, text in files.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(text)


def test_the_engine_scan_sees_a_circle_through_crate_paths(tmp_path: Path) -> None:
    # The shape the crate once had: the interpreter's nodes held the SQL and message steps, whose
    # modules took their templated text back from the interpreter.
    files = {
        "lib.rs": "mod interpreter;\nmod message;\nmod sql;\nmod template;\n",
        "interpreter/mod.rs": "/// A `sql` step (`crate::template`).\npub(crate) enum Node { Sql(Box<crate::sql::SqlNode>) }\n",
        "sql/mod.rs": "use crate::{template::Text, message::{Framing}};\n",
        "message/mod.rs": "use crate::interpreter::Node; // not crate::sql\n",
        "template.rs": "const HOME: &str = \"http://localhost/\"; use crate::error::EngineError;\n",
        "error.rs": "",
    }
    _write_sources(tmp_path, files)
    graph = _engine_graph(tmp_path)
    assert graph == {
        "interpreter": {"sql": True},
        "sql": {"template": True, "message": True},
        "message": {"interpreter": True},
        "template": {"error": True},
        "error": {},
    }
    assert _cycles(graph) == [["interpreter", "message", "sql"]]


# -- every crate, file by file -------------------------------------------------------------------

CRATES = ENGINE_SOURCE.parents[1]
#: A path that names a module from where it is written: ``crate::``, ``super::`` or ``self::``,
#: its middle names, then a last name or a brace group.
_RELATIVE_PATH = re.compile(r"\b(crate|super|self)::((?:\w+::)*)(\w+|\{)")
#: ``use rooms::Rooms`` in a module that declares ``mod rooms``: a path from the module's own
#: children, written without ``self::``.
_BARE_USE = re.compile(r"\buse\s+(\w+)::")


def _crate_modules(source: Path) -> dict[str, Path]:
    """A crate's modules by path (``message::kcp``; the crate root is ``""``), each with its file."""
    modules = {}
    for path in source.rglob("*.rs"):
        parts = list(path.relative_to(source).with_suffix("").parts)
        if parts[0] == "bin":
            continue  # each binary is a crate of its own
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        modules["::".join(parts)] = path
    return modules


def _crate_graph(source: Path) -> dict[str, dict[str, bool]]:
    """Which of a crate's modules each names (every ``use`` and path in its file, tests
    included), file by file: a path resolves to the longest module it starts with. A module
    naming one of its ancestors (its namespace: ``super::Thing`` defined in ``mod.rs``) is not
    a dependency; siblings and cousins are."""
    modules = _crate_modules(source)
    graph: dict[str, dict[str, bool]] = {module: {} for module in modules}
    for module, path in modules.items():
        code = _LINE_COMMENT.sub("", path.read_text(encoding="utf-8"))
        here = module.split("::") if module else []
        for match in _RELATIVE_PATH.finditer(code):
            root, middle, last = match.groups()
            base = [] if root == "crate" else here[:-1] if root == "super" else here
            heads = [last] if last != "{" else _brace_group_heads(code, match.end() - 1)
            for head in heads:
                names = base + [name for name in middle.split("::") if name] + [head]
                target = next(
                    ("::".join(names[:k]) for k in range(len(names), 0, -1) if "::".join(names[:k]) in modules), ""
                )
                if target and target != module and not module.startswith(target + "::"):
                    graph[module][target] = True
        for match in _BARE_USE.finditer(code):
            child = "::".join([*here, match.group(1)])
            if child in modules and child != module:
                graph[module][child] = True
    return graph


def test_no_crate_has_a_module_circle() -> None:
    # Every crate's modules name one another one way only, file by file (a circle between two
    # files of one folder is still a circle).
    sources = sorted(path / "src" for path in CRATES.iterdir() if (path / "src").is_dir())
    assert {"horde-engine", "horde-plan", "horde-target"} <= {source.parent.name for source in sources}
    circles = {source.parent.name: _cycles(_crate_graph(source)) for source in sources}
    assert all(circles[name] == [] for name in circles), {name: found for name, found in circles.items() if found}


def test_the_crate_scan_sees_circles_through_super_self_and_bare_uses(tmp_path: Path) -> None:
    # The shapes the crates once had: two files of one folder naming each other through
    # `super::`, a child used by its folder's `mod.rs` without `self::`, and a sibling reached
    # from there; a file naming its folder's own items (`super::Counts` in mod.rs) is no circle.
    files = {
        "lib.rs": "mod sql;\nmod gateway;\nmod websocket;\n",
        "sql/mod.rs": "mod connect;\nmod connection;\npub use connect::open;\n",
        "sql/connect.rs": "use super::connection::Connection; // super::nothing\n",
        "sql/connection.rs": "pub fn reopen() { super::connect::open() }\nuse super::Counts;\n",
        "gateway/mod.rs": "mod rooms;\nuse rooms::Rooms;\n",
        "gateway/rooms.rs": "use crate::{websocket::Outgoing, sql};\n",
        "websocket.rs": "use crate::gateway::Player;\n",
    }
    _write_sources(tmp_path, files)
    graph = _crate_graph(tmp_path)
    assert graph["sql::connect"] == {"sql::connection": True} and graph["sql"] == {"sql::connect": True}
    assert graph["gateway::rooms"] == {"websocket": True, "sql": True}
    assert sorted(sorted(circle) for circle in _cycles(graph)) == [
        ["gateway", "gateway::rooms", "websocket"],
        ["sql::connect", "sql::connection"],
    ]
