"""Imports run one way: no cycle between files, no cycle between folders, and every import from
one folder to another goes down the layers drawn in docs/architecture.md ("Layers").

The graph counts every import in solarian_agent/: module-level, lazy (inside a function) and
``if TYPE_CHECKING:`` ones alike, because each is a dependency a reader has to follow and a
lazy import is only a cycle postponed.  ``from pkg import name`` depends on ``pkg`` (its
``__init__``) as well as on ``pkg.name`` when that is a module.  A folder is a subpackage of
solarian_agent (``core``, ``hw``, ...); each top-level module (``system.py``, ``demo.py``) is
its own node, and the package's own ``__init__.py`` is one too.

A failure lists every offending cycle or edge, with the file and line of each import in it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import solarian_agent

PACKAGE = Path(solarian_agent.__file__).parent
DOC = PACKAGE.parent / "docs" / "architecture.md"
PKG_NODE = "__init__.py"  # the package's own __init__, as a folder-level node

# bottom to top; a folder may import only folders on lower lines (never one on its own line)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__.py", "paths.py", "cli_keys.py"),
    ("core/",),
    ("cli_common.py",),
    ("arm/",),
    ("perception/",),
    ("models/",),
    ("hw/", "sim/", "skills/", "task_check.py", "rosmsg/"),
    ("system.py", "testing/", "bringup/"),
    ("tick_sets.py",),
    ("demo.py", "monitor_eval.py", "monitor_label.py", "ui/"),
    ("monitor_record.py",),
    ("benchmarks/",),
    ("ros/",),
    ("cli.py",),
)


@dataclass(frozen=True)
class Edge:
    """One import: module ``src`` imports module ``dst`` at ``path``:``line``."""

    src: str
    dst: str
    path: str
    line: int

    def where(self) -> str:
        return f"{short(self.src)} -> {short(self.dst)} ({self.path}:{self.line})"


def short(module: str) -> str:
    return module.removeprefix(f"{PACKAGE.name}.") or module


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under ``package`` (a package's __init__ is
    named by its package)."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        parts = p.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _targets(cur: str, is_init: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names one import statement names (resolved if relative)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        pkg = cur if is_init else cur.rsplit(".", 1)[0]
        base = pkg.split(".")
        base = base[:len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def import_edges(package: Path) -> list[Edge]:
    """Every import between two modules of ``package``: a name is resolved to the longest
    module it starts with (``pkg.mod.func`` -> ``pkg.mod``)."""
    mods = modules(package)
    root = package.parent
    edges: set[Edge] = set()
    for cur, path in mods.items():
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _targets(cur, path.name == "__init__.py", node):
                while name and name not in mods:
                    name = name.rsplit(".", 1)[0] if "." in name else ""
                if name and name != cur:
                    edges.add(Edge(cur, name, rel, node.lineno))
    return sorted(edges, key=lambda e: (e.src, e.dst, e.line))


def folder(module: str, package: Path) -> str:
    """The folder-level node of a module: ``core/``, ``demo.py`` or ``__init__.py``."""
    parts = module.split(".")
    if len(parts) == 1:
        return PKG_NODE
    if len(parts) == 2 and not (package / parts[1]).is_dir():
        return f"{parts[1]}.py"
    return f"{parts[1]}/"


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's, iterative)."""
    nodes = sorted(set(graph) | {w for ws in graph.values() for w in ws})
    succ = {v: sorted(set(graph.get(v, ()))) for v in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(out)


def _file_cycles(edges: list[Edge]) -> list[str]:
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.src, set()).add(e.dst)
    out = []
    for comp in cycles(graph):
        inside = set(comp)
        out.append(" <-> ".join(short(m) for m in comp) + "".join(
            f"\n    {e.where()}" for e in edges if e.src in inside and e.dst in inside))
    return out


def _folder_edges(edges: list[Edge], package: Path) -> dict[tuple[str, str], list[Edge]]:
    out: dict[tuple[str, str], list[Edge]] = {}
    for e in edges:
        a, b = folder(e.src, package), folder(e.dst, package)
        if a != b:
            out.setdefault((a, b), []).append(e)
    return out


def _folder_cycles(edges: list[Edge], package: Path) -> list[str]:
    by_pair = _folder_edges(edges, package)
    graph: dict[str, set[str]] = {}
    for a, b in by_pair:
        graph.setdefault(a, set()).add(b)
    out = []
    for comp in cycles(graph):
        lines = [" <-> ".join(comp)]
        for (a, b), es in sorted(by_pair.items()):
            if a in comp and b in comp:
                lines.append(f"    {a} -> {b}: " + "; ".join(e.where() for e in es))
        out.append("\n".join(lines))
    return out


def layer_of(layers: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    return {node: k for k, line in enumerate(layers) for node in line}


def _nodes(package: Path) -> set[str]:
    return {folder(m, package) for m in modules(package)}


def _upward(edges: list[Edge], package: Path, layers: tuple[tuple[str, ...], ...]
            ) -> list[str]:
    level = layer_of(layers)
    out = []
    for (a, b), es in sorted(_folder_edges(edges, package).items()):
        if a in level and b in level and level[b] >= level[a]:
            how = "on its own layer" if level[b] == level[a] else "above it"
            out.append(f"{a} -> {b} ({b} is {how}): " + "; ".join(e.where() for e in es))
    return out


def drawn_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The layers of the fenced block under "## Layers" in architecture.md, bottom to top
    (the block draws them top to bottom: one line per layer, names separated by spaces)."""
    section = text.split("\n## Layers", 1)[1]
    block = section.split("```", 2)[1]
    lines = []
    for line in block.splitlines()[1:]:
        names = tuple(re.findall(r"[A-Za-z_][\w.]*(?:/|\.py)", line))
        if names:
            lines.append(names)
    return tuple(reversed(lines))


# -------------------------------------------------------------------------------------------


EDGES = import_edges(PACKAGE)


def test_no_import_cycle_between_files() -> None:
    found = _file_cycles(EDGES)
    assert not found, f"{len(found)} import cycle(s) between files:\n" + "\n".join(found)


def test_no_import_cycle_between_folders() -> None:
    found = _folder_cycles(EDGES, PACKAGE)
    assert not found, f"{len(found)} import cycle(s) between folders:\n" + "\n".join(found)


def test_every_folder_import_goes_down_the_layers() -> None:
    found = _upward(EDGES, PACKAGE, LAYERS)
    assert not found, (f"{len(found)} folder import(s) not going down the layers "
                       "(docs/architecture.md, Layers):\n" + "\n".join(found))


def test_every_folder_has_its_layer() -> None:
    placed = layer_of(LAYERS)
    assert len(placed) == sum(len(line) for line in LAYERS), "a folder is placed twice"
    missing = sorted(_nodes(PACKAGE) - set(placed))
    assert not missing, ("not placed in the layers (add them to docs/architecture.md's "
                         f"Layers and to LAYERS here): {', '.join(missing)}")
    gone = sorted(set(placed) - _nodes(PACKAGE))
    assert not gone, f"placed in the layers but not in the package: {', '.join(gone)}"


def test_the_layers_are_the_ones_drawn_in_the_architecture_notes() -> None:
    assert drawn_layers(DOC.read_text(encoding="utf-8")) == LAYERS


# the check itself, on a small package: relative, lazy and TYPE_CHECKING imports are seen, a
# name imported from a module is the module, a package's __init__ is a node of its own


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "pk" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "pk"


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    pkg = _write(tmp_path, {
        "__init__.py": "",
        "top.py": "from .low import a\n",
        "low/__init__.py": "from . import a\n",
        "low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from ..top import X\n",
        "low/b.py": "def f():\n    from pk.mid.c import g\n",
        "mid/__init__.py": "",
        "mid/c.py": "import pk.low.b\nfrom .. import top\n",
    })
    got = {(e.src, e.dst) for e in import_edges(pkg)}
    assert got == {
        ("pk.top", "pk.low"), ("pk.top", "pk.low.a"), ("pk.low", "pk.low.a"),
        ("pk.low.a", "pk.top"), ("pk.low.b", "pk.mid.c"), ("pk.mid.c", "pk.low.b"),
        ("pk.mid.c", "pk"), ("pk.mid.c", "pk.top"),
    }
    edges = import_edges(pkg)
    assert [c.split("\n")[0] for c in _file_cycles(edges)] == [
        "pk.low <-> pk.low.a <-> pk.top", "pk.low.b <-> pk.mid.c"]
    assert [c.split("\n")[0] for c in _folder_cycles(edges, pkg)] == [
        "low/ <-> mid/ <-> top.py"]
    layers = (("__init__.py",), ("low/",), ("mid/", "top.py"))
    assert [u.split(" (")[0] for u in _upward(edges, pkg, layers)] == [
        "low/ -> mid/", "low/ -> top.py", "mid/ -> top.py"]
    assert {folder(m, pkg) for m in modules(pkg)} == {"__init__.py", "low/", "mid/", "top.py"}


def test_a_cycle_is_found_however_deep_the_chain() -> None:
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(3000)}
    chain["m3000"] = {"m0"}
    assert [len(c) for c in cycles(chain)] == [3001]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_drawn_layers_read_top_to_bottom() -> None:
    text = "x\n## Layers\n\ntext\n```\ncli.py        the top\nros/  ui/\ncore/\n```\n"
    assert drawn_layers(text) == (("core/",), ("ros/", "ui/"), ("cli.py",))
