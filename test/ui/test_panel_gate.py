"""The panel shows who holds the arm and the last refused commands, from the arm driver's
command gate (``arm/gate``), over the same BusLink the embedded run and the ROS panel use."""

from __future__ import annotations

import json

import pytest

from solarian_agent.arm.gate import ArmHeldError, CommandGate
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


def test_the_lock_holder_answers_a_waiting_skill_from_the_panel():
    from ui_helpers import SSE, post

    from solarian_agent.core.clock import SystemClock
    from solarian_agent.ui.panel import serve_panel

    bus = Bus()
    asked: list[dict] = []

    def approve(req):
        asked.append(dict(req))
        return {"ok": True, "reason": "approved a7 (move_to_pose)"}

    bus.create_service(names.SKILL_APPROVE, names.T_AGENT_COMMAND, approve)
    panel = serve_panel(bus, SystemClock(), "127.0.0.1", 0)
    page = None
    try:
        page = SSE(panel.url)
        assert post(panel.url, "api/message", {"token": page.token, "text": "/approve a7"}
                    )[0] == 403  # the control lock first
        assert post(panel.url, "api/lock", {"token": page.token})[0] == 200
        code, r = post(panel.url, "api/message", {"token": page.token, "text": "/approve a7"})
        assert code == 200 and r["ok"] and "approved a7" in r["reason"]
        code, r = post(panel.url, "api/message", {"token": page.token,
                                                  "text": "/refuse too close to the edge"})
        assert code == 200
        assert asked == [{"text": "approve a7", "by": "operator (panel)"},
                         {"text": "refuse too close to the edge", "by": "operator (panel)"}]
    finally:
        if page is not None:
            page.close()
        panel.stop()


@pytest.mark.browser
def test_the_page_shows_the_holder_and_the_refusals(browser):
    """In Chromium: the header names the holder, the list shows the newest refusal first."""
    from selenium.webdriver.common.by import By
    from ui_helpers import wait_for

    from solarian_agent.core.clock import SystemClock
    from solarian_agent.ui.panel import serve_panel

    bus = Bus()
    gate = CommandGate()
    pub = bus.publisher(names.ARM_GATE, names.T_STRING, LATCHED)
    panel = serve_panel(bus, SystemClock(), "127.0.0.1", 0)
    try:
        browser.get(panel.url)
        holder = browser.find_element(By.ID, "arm-holder")
        wait_for(lambda: holder.text == "arm: free", 10, "the free arm")
        gate.admit("agent", 0.0)
        gate.admit("operator", 0.1)
        with pytest.raises(ArmHeldError):
            gate.admit("agent", 0.2)
        pub.publish(gate.status(0.3))
        wait_for(lambda: holder.text == "arm: operator", 10, "the operator holding the arm")
        items = browser.find_elements(By.CSS_SELECTOR, "#refusals li[data-kind]")
        assert [i.get_attribute("data-kind") for i in items] == ["refused", "preempted"]
        assert "held by operator" in items[0].text
    finally:
        panel.stop()
