"""The panel shows who holds the arm and the last refused commands, from the arm driver's
command gate (``arm/gate``), over the same BusLink the embedded run and the ROS panel use."""

from __future__ import annotations

import json

from solarian_agent.arm.gate import CommandGate
from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.transport import LATCHED, Bus
from solarian_agent.ui.link import BusLink
from solarian_agent.ui.panel import PanelHub


def test_the_panel_shows_the_holder_and_the_last_refusals():
    bus = Bus()
    clock = FakeClock()
    gate = CommandGate()
    pub = bus.publisher(names.ARM_GATE, names.T_STRING, LATCHED)
    link = BusLink(bus)
    hub = PanelHub(link, clock)
    c = hub.connect()
    first = [json.loads(m) for m in hub.take(c)]
    assert {"type": "gate", "gate": {}} in first  # nothing known yet
    gate.admit("agent", 0.0)
    gate.admit("operator", 0.1)
    try:
        gate.admit("agent", 0.2)
    except Exception:
        pass
    pub.publish(gate.status(0.3))
    hub._tick()
    sent = [json.loads(m) for m in hub.take(c)]
    (g,) = [m["gate"] for m in sent if m["type"] == "gate"]
    assert g["holder"] == "operator" and g["refused_total"] == 2
    assert [r["kind"] for r in g["last_refusals"]] == ["preempted", "refused"]
    assert g["last_refusals"][-1]["reason"].startswith("held by operator")
    # unchanged: not sent again
    hub._tick()
    assert not [m for m in hub.take(c) if json.loads(m)["type"] == "gate"]
    link.close()
