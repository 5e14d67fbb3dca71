"""Recorded monitor ticks as the two tick commands read them (:mod:`.monitor_label` labels them,
:mod:`.monitor_eval` measures questions on them): a tick set, its labels and its target boxes,
the options both commands take, and ``--skill``, the tool whose monitor questions are asked.

``TICKS`` is a tick-set directory (``ticks.jsonl``, ``images/``, ``skill.json`` with the tool's
``monitor`` questions; made by ``solarian-agent make-ticks`` from the product's own episodes, or
see ``test/data/make_monitor_ticks.py``) or an episode log directory (or
a tree of them), whose ``monitor_tick`` events name the frames the monitor saw; then
``--skill`` names a JSON/YAML file holding the tool's ``monitor`` questions.  Labels and boxes
are JSON lines, appended: the last record of a tick wins, and a torn last line is skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .cli_common import CliParser
from .core.monitor import QuestionSpec, parse_questions

UNSURE = "unsure"  # the label of a tick its labeller could not judge (never evaluated)


@dataclass
class Tick:
    id: str
    pick: str
    tick: int
    tool: str
    elapsed_s: float
    questions: list[str]
    images: list[dict[str, Any]]
    readings: dict[str, Any]
    root: Path

    def image_path(self, rec: dict[str, Any]) -> Path:
        return self.root / str(rec["file"])


@dataclass
class TickSet:
    ticks: list[Tick]
    skill: dict[str, Any] = field(default_factory=dict)
    root: Path = Path(".")

    def questions(self) -> tuple[QuestionSpec, ...]:
        tool = str(self.skill.get("tool", "tool"))
        return parse_questions(tool, list(self.skill.get("monitor") or ()))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.skill.get("monitor_config") or {})


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn last line
    return out


def _load_skill(path: Path | dict[str, Any] | None) -> dict[str, Any]:
    if isinstance(path, dict):
        return dict(path)
    if path is None or not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if isinstance(doc, dict) and "agent" in doc and isinstance(doc["agent"], dict):
        doc = doc["agent"]
    return dict(doc or {})


def load_ticks(path: Path, skill: Path | dict[str, Any] | None = None) -> TickSet:
    path = Path(path)
    if (path / "ticks.jsonl").exists():
        ticks = [Tick(str(r["id"]), str(r.get("pick", r["id"])), int(r.get("tick", 0)),
                      str(r.get("tool", "")), float(r.get("elapsed_s", 0.0)),
                      list(r.get("questions") or []), list(r.get("images") or []),
                      dict(r.get("readings") or {}), path)
                 for r in _read_jsonl(path / "ticks.jsonl")]
        return TickSet(ticks, _load_skill(skill or path / "skill.json"), path)
    logs = sorted(p.parent for p in path.rglob("events.jsonl")) if path.is_dir() else []
    ticks = []
    for log in logs:
        ep = str(log.relative_to(path)) if log != path else log.name
        for ev in _read_jsonl(log / "events.jsonl"):
            if ev.get("kind") != "monitor_tick" or not ev.get("images"):
                continue
            aid = str(ev.get("action_id", ""))
            n = int(ev.get("tick", 0))
            ticks.append(Tick(f"{ep}/{aid}/t{n:03d}", f"{ep}/{aid}", n, str(ev.get("tool", "")),
                              float(ev.get("elapsed_s", 0.0)), list(ev.get("questions") or []),
                              [i for i in ev["images"] if not i.get("reference")],
                              dict(ev.get("readings") or {}), log))
    return TickSet(ticks, _load_skill(skill), path)


def load_labels(path: Path) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for r in _read_jsonl(path):
        out[(str(r["id"]), str(r.get("question", "")))] = str(r["label"])
    return out


def load_targets(path: Path) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for r in _read_jsonl(path):
        box = r.get("box")
        out[str(r["file"])] = [int(v) for v in box] if box else None
    return out


def append_record(path: Path, rec: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def tick_options(ap: CliParser) -> None:
    """What label-ticks and eval-monitor both take: the ticks, the tool, labels and boxes."""
    ap.add_argument("ticks", type=Path, help="a tick-set directory or episode log directory")
    ap.add_argument("--skill", default=None, metavar="TOOL|FILE",
                    help="the tool whose monitor questions are asked: a tool's name "
                         "(pick_object, place_at) or a JSON/YAML file with its monitor list "
                         "(default: TICKS/skill.json)")
    ap.add_argument("--labels", type=Path, default=None,
                    help="the labels file (default TICKS/labels.jsonl)")
    ap.add_argument("--targets", type=Path, default=None,
                    help="the target boxes file (default TICKS/targets.jsonl)")


def skill_file(ap: CliParser, value: str | None) -> Path | dict[str, Any] | None:
    """``--skill``: an existing file, or the name of a tidy tool with monitor questions
    (its questions and the shipped configuration's monitor settings); else a usage error."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.exists():
        return path
    from .system import default_config_path, tidy_tools

    tools = {name: t.skill for name, t in tidy_tools().items()
             if getattr(t.skill, "monitor", ())}
    if value not in tools:
        ap.error(f"--skill {value!r}: no such file, and no tool of that name has monitor "
                 f"questions (tools: {', '.join(sorted(tools))})")
    doc = yaml.safe_load(default_config_path().read_text(encoding="utf-8")) or {}
    monitor = dict((doc.get("agent") or {}).get("monitor") or {})
    return {"tool": value, "monitor": [dict(q) for q in tools[value].monitor],
            "monitor_config": monitor}

