"""The core depends on interfaces only: no module in solarian_agent/core/ imports perception, a
model provider (the provider interface is core/model_api.py), the simulator, skills, hardware
drivers, the UI or the ROS layer.  Implementations are wired in system.py and the ROS
components."""

import ast
from pathlib import Path

import solarian_agent

CORE = Path(solarian_agent.__file__).parent / "core"
ALLOWED_OUTSIDE: set[str] = set()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in one core module, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.lineno, node.module or ""))
            else:
                base = ["solarian_agent", "core"][:max(0, 2 - (node.level - 1))]
                mod = ".".join(base + ([node.module] if node.module else []))
                out.append((node.lineno, mod))
    return out


def test_core_imports_no_implementation():
    bad = []
    for path in sorted(CORE.glob("*.py")):
        for line, mod in _imports(path):
            if not mod.startswith("solarian_agent."):
                continue
            if mod.startswith("solarian_agent.core") or mod in ALLOWED_OUTSIDE:
                continue
            bad.append(f"{path.name}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_relative_and_lazy_imports(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from ..perception import images\n"
                 "def f():\n    from ..models.factory import build_provider\n"
                 "from .clock import Clock\nfrom ..models.base import ModelError\n")
    assert sorted(m for _, m in _imports(p)) == [
        "solarian_agent.core.clock", "solarian_agent.models.base",
        "solarian_agent.models.factory", "solarian_agent.perception"]
