"""The panel shows each node of the graph as the planner sees it: up, lost or back.
The page's JSON state carries the planner's ``AgentState.nodes``; the page renders each as a
chip whose ``data-state`` says it."""

from __future__ import annotations

import json
from pathlib import Path

from test_panel import FakeLink

import solarian_agent
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import AgentState
from solarian_agent.ui.panel import PanelHub

PANEL = Path(solarian_agent.__file__).parent / "data" / "panel"


def _state(nodes: tuple[dict, ...]) -> AgentState:
    return AgentState(2, "running", "tidy", (), (), (), nodes=nodes)


def test_a_lost_node_is_in_the_pages_state_then_back():
    link = FakeLink()
    hub = PanelHub(link, FakeClock())  # type: ignore[arg-type]
    link.emit("state", _state(({"node": "monitor", "state": "up", "since_s": 3.0},
                               {"node": "skills", "state": "lost", "since_s": 0.4})))
    hub._process(hub.intake.drain())
    assert {n["node"]: n["state"] for n in hub.state["nodes"]} == {"monitor": "up",
                                                                   "skills": "lost"}
    # what a page receives (the snapshot a new page gets) says it too
    snap = [json.loads(m) for m in hub.snapshot_messages(None)]
    st = next(m["state"] for m in snap if m.get("type") == "state")
    assert {"node": "skills", "state": "lost", "since_s": 0.4} in st["nodes"]
    link.emit("state", _state(({"node": "monitor", "state": "up", "since_s": 4.0},
                               {"node": "skills", "state": "back", "since_s": 0.1})))
    hub._process(hub.intake.drain())
    assert [n["state"] for n in hub.state["nodes"]] == ["up", "back"]


def test_the_page_renders_each_node_with_its_state():
    html = (PANEL / "index.html").read_text()
    js = (PANEL / "panel.js").read_text()
    css = (PANEL / "panel.css").read_text()
    assert 'id="nodes"' in html
    assert '$("nodes")' in js and '"data-state": n.state' in js
    assert '.node[data-state="lost"]' in css
