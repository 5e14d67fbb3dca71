"""The panel's server without a browser: the control lock, Cancel and E-STOP from any viewer,
the e-stop's clear error when nothing serves it, bad requests, errors that must not escape,
bounded queues.  The door (Host names, same-origin JSON, the access token, replayed ids) has
its own tests in test_panel_door.py."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from ui_helpers import SSE, Stepper, TriggerServer, get, post, wait_for

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import AgentEvent, AgentState, Image
from solarian_agent.core.transport import Bus
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import make_harness
from solarian_agent.ui.event_lines import describe_event
from solarian_agent.ui.link import BusLink
from solarian_agent.ui.panel import Intake, PanelHub, serve_panel


class FakeLink:
    """An AgentLink whose commands are recorded (or raise)."""

    def __init__(self, raise_on: str = "") -> None:
        self.cbs: dict[str, list[Any]] = {"state": [], "event": [], "verdict": [],
                                          "operator": []}
        self.sent: list[tuple[str, str]] = []
        self.raise_on = raise_on
        self.image: Image | None = None

    def _cmd(self, what: str, arg: str) -> dict[str, Any]:
        if what == self.raise_on:
            raise RuntimeError(f"{what} exploded")
        self.sent.append((what, arg))
        return {"ok": True, "reason": ""}

    def message(self, text: str) -> dict[str, Any]:
        return self._cmd("message", text)

    def cancel(self, by: str = "operator") -> dict[str, Any]:
        return self._cmd("cancel", by)

    def reset(self, by: str = "operator") -> dict[str, Any]:
        return self._cmd("reset", by)

    def on_state(self, cb: Any) -> None:
        self.cbs["state"].append(cb)

    def on_event(self, cb: Any) -> None:
        self.cbs["event"].append(cb)

    def on_verdict(self, cb: Any) -> None:
        self.cbs["verdict"].append(cb)

    def on_operator(self, cb: Any) -> None:
        self.cbs["operator"].append(cb)

    def image_topics(self) -> list[str]:
        return ["cam/image_raw", "agent/view"]

    def latest_image(self, topic: str) -> Image | None:
        return self.image if topic == "cam/image_raw" else None

    def close(self) -> None:
        pass

    def emit(self, kind: str, msg: Any) -> None:
        for cb in self.cbs[kind]:
            cb(msg)


def test_lock_and_cancel_from_any_viewer(tmp_path):
    h = make_harness([reply("waiting", ("wait", {"seconds": 30}))], log_root=tmp_path)
    with Stepper(h, max_s=30):
        panel = serve_panel(h.bus, h.clock, "127.0.0.1", 0)
        a = b = None
        try:
            url = panel.url
            a, b = SSE(url), SSE(url)
            ca, ta, tb = a.client, a.token, b.token
            assert post(url, "api/lock", {"token": ta}) == (200, {"ok": True, "reason": "",
                                                                  "holder": ca})
            code, r = post(url, "api/lock", {"token": tb})
            assert code == 403 and r["holder"] == ca
            assert post(url, "api/lock", {"token": "made-up"})[0] == 403
            # without the lock: no message, no reset
            assert post(url, "api/message", {"token": tb, "text": "go"})[0] == 403
            assert post(url, "api/message", {"text": "go"})[0] == 403
            assert post(url, "api/reset", {"token": tb})[0] == 403
            assert h.planner.status == "idle"
            # with it: the task reaches the planner
            assert post(url, "api/message", {"token": ta, "text": "wait for me"})[0] == 200
            wait_for(lambda: h.planner.actions, 10, "the wait to start")
            wait_for(lambda: any(m["state"]["actions"] for m in b.of("state")), 5,
                     "viewer B to see the running action")
            # Cancel is a safety command: the viewer without the lock may send it, without
            # any token (but as JSON: a bare or text/plain POST is what another site sends)
            assert post(url, "api/cancel", b"", content_type="text/plain")[0] == 415
            assert post(url, "api/cancel", {})[0] == 200
            wait_for(lambda: h.planner.status == "cancelled" and not h.planner.actions, 10,
                     "the cancel")
            wait_for(lambda: any(m["state"]["status"] == "cancelled" for m in a.of("state")), 5,
                     "the holder to see it")
            # /cancel typed by a viewer also works without the lock
            assert post(url, "api/message", {"token": tb, "text": "/cancel"})[0] == 200
            # the holder leaves: the lock is free for the next viewer
            a.close()
            wait_for(lambda: panel.hub.lock.holder is None, 5, "the lock to be released")
            wait_for(lambda: {"type": "lock", "holder": None} in b.of("lock"), 5,
                     "B to hear the lock is free")
            assert post(url, "api/lock", {"token": tb})[0] == 200
            assert post(url, "api/unlock", {"token": tb})[0] == 200
            assert post(url, "api/unlock", {"token": tb})[0] == 409
        finally:
            for s in (a, b):
                if s is not None:
                    s.close()
            panel.stop()
    assert panel.hub.pump_errors == 0


def test_pages_assets_frames_and_bad_requests():
    link = FakeLink()
    frame = np.zeros((480, 640, 3), np.uint8)
    frame[200:240, 300:340] = (0, 0, 255)
    link.image = Image(frame, 1.0, "cam", 1)
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        url = panel.url
        code, body, ctype = get(url, "")
        assert code == 200 and ctype.startswith("text/html") and b"panel.js" in body
        for name, kind in (("panel.js", "javascript"), ("panel.css", "css")):
            code, body, ctype = get(url, f"static/{name}")
            assert code == 200 and kind in ctype and body
        assert get(url, "static/../../setup.py")[0] == 404
        assert get(url, "static/secret.txt")[0] == 404
        code, body, ctype = get(url, "frame?topic=cam/image_raw")
        assert code == 200 and ctype == "image/jpeg" and body[:2] == b"\xff\xd8"
        assert get(url, "frame?topic=agent/view")[0] == 204  # nothing yet
        assert get(url, "frame?topic=/etc/passwd")[0] == 404
        # commands must be JSON: a cross-site form post cannot send one
        assert post(url, "api/message", b"text=hi",
                    content_type="application/x-www-form-urlencoded")[0] == 415
        assert post(url, "api/lock", b"{not json")[0] == 400
        assert post(url, "api/lock", b"[1, 2]")[0] == 400
        assert link.sent == []


def test_no_exception_escapes_a_handler():
    link = FakeLink(raise_on="cancel")
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        code, r = post(panel.url, "api/cancel", {})
        assert code == 500 and r["ok"] is False and "RuntimeError" in r["reason"]
        assert get(panel.url, "api/state")[0] == 200  # still serving


def test_pump_survives_bad_messages():
    link = FakeLink()
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        s = SSE(panel.url)
        try:
            s.client  # noqa: B018 - connected
            link.emit("state", object())  # not an AgentState
            link.emit("event", AgentEvent("2026-01-01T00:00:00Z", "run_started",
                                          {"run_id": "x/1", "task": "still here"}))
            wait_for(lambda: s.of("event"), 5, "the event after the bad state")
            assert "still here" in s.of("event")[0]["event"]["text"]
            assert panel.hub.pump_errors == 1
            link.emit("state", AgentState(3, "running", "t", ({"step": 1, "description": "d",
                                                               "status": "pending"},),
                                          (), ({"role": "user", "text": float("nan")},)))
            wait_for(lambda: any(m["state"]["status"] == "running" for m in s.of("state")), 5,
                     "a state with NaN in it")
        finally:
            s.close()


def test_client_queue_is_bounded_drops_oldest_and_resyncs():
    link = FakeLink()
    hub = PanelHub(link, FakeClock(), client_queue=16)
    c = hub.connect()
    hub.take(c)
    for i in range(100):
        hub.broadcast({"type": "event", "event": {"kind": "x", "n": i}})
    assert len(c.queue) == 16 and c.dropped == 84
    out = hub.take(c)
    assert '"type": "dropped"' in out[0] and '"count": 84' in out[0]
    # the queue's stale remainder is replaced by the snapshot (state, recent events, lock)
    assert any('"type": "state"' in p for p in out) and any('"type": "events"' in p for p in out)
    assert not any('"n": ' in p for p in out)
    hub.broadcast({"type": "event", "event": {"kind": "x", "n": 100}})
    assert hub.take(c) == ['{"type": "event", "event": {"kind": "x", "n": 100}}']
    assert hub.take(c) == []


def test_intake_is_bounded_and_counts_drops():
    intake = Intake(maxlen=3)
    for i in range(5):
        intake.put("event", i)
    assert intake.dropped == 2 and [m for _, m in intake.drain()] == [2, 3, 4]


def test_frames_are_announced_at_a_bounded_rate():
    bus = Bus()
    pub = bus.publisher(names.image_topic("cam"), names.T_IMAGE)
    img = np.zeros((48, 64, 3), np.uint8)
    with serve_panel(bus, FakeClock(), "127.0.0.1", 0, fps=5.0) as panel:
        s = SSE(panel.url)
        try:
            t0 = time.monotonic()
            n = 0
            while time.monotonic() - t0 < 1.0:
                n += 1
                pub.publish(Image(img, 0.0, "cam", n))
                time.sleep(0.005)
            frames = [m for m in s.of("frame") if m["topic"] == "cam/image_raw"]
            assert n > 50 and 2 <= len(frames) <= 8
        finally:
            s.close()


def test_bus_link_never_raises_into_the_publisher():
    bus = Bus()
    link = BusLink(bus, ["cam"])
    link.on_event(lambda ev: 1 / 0)
    pub = bus.publisher(names.AGENT_EVENTS, names.T_AGENT_EVENT)
    pub.publish(AgentEvent("t", "run_ended", {"status": "succeeded"}))
    assert link.callback_errors == 1
    r = link.message("hi")  # no agent on this bus
    assert r["ok"] is False and "agent/message" in r["reason"]
    assert link.image_topics() == ["cam/image_raw", "agent/view"]
    link.close()


def test_describe_event_lines():
    assert describe_event("run_ended", {"status": "cancelled", "summary": "stop"}) == \
        "run ended cancelled: stop"
    assert "planner turn turns/0001.json" in describe_event(
        "planner_turn", {"turn": "turns/0001.json", "latency_s": 1.2, "tools": ["observe"]})
    assert describe_event("weird", {"x": 1}) == 'weird {"x": 1}'
    assert describe_event("monitor_answer", {"probability": "bad", "question": "q"})


# ----------------------------------------------------------------------------------------
# e-stop
# ----------------------------------------------------------------------------------------
def test_estop_endpoint_without_an_estop_service_is_a_clear_error():
    bus = Bus()  # nothing serves estop: no arm driver, no simulator
    with serve_panel(bus, FakeClock(), "127.0.0.1", 0) as panel:
        url = panel.url
        s = SSE(url)
        try:
            c = s.token
            # the page is told at once, so its button says the e-stop is unavailable
            wait_for(lambda: s.of("estop"), 5, "the e-stop snapshot")
            assert s.of("estop")[-1]["estop"]["available"] is False
            for payload in ({"token": c}, {}):
                code, r = post(url, "api/estop", payload)
                assert code == 503, (code, r)
                assert r["ok"] is False and r["unavailable"] is True
                assert "e-stop unavailable" in r["reason"] and "'estop'" in r["reason"]
            assert post(url, "api/estop", b"{broken")[0] == 400
            # typed in the input box, by a viewer without the lock: the same answer
            code, r = post(url, "api/message", {"token": c, "text": "/estop now"})
            assert code == 503 and r["unavailable"] is True
            # releasing needs the lock first, then says the same
            assert post(url, "api/estop_reset", {"token": c})[0] == 403
            assert post(url, "api/lock", {"token": c})[0] == 200
            code, r = post(url, "api/estop_reset", {"token": c})
            assert code == 503 and "'estop_reset'" in r["reason"]
            code, body, _ = get(url, "api/state")
            assert code == 200 and json.loads(body)["estop"]["available"] is False
        finally:
            s.close()
    assert panel.hub.pump_errors == 0


def test_estop_with_a_link_that_has_no_estop_methods():
    link = FakeLink()  # an AgentLink written before the e-stop existed
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        code, r = post(panel.url, "api/estop", {})
        assert code == 503 and r["unavailable"] is True and "e-stop unavailable" in r["reason"]
        assert panel.hub.estop["available"] is False
    assert link.sent == []


def test_bus_link_estop_without_a_service():
    link = BusLink(Bus(), [])
    assert link.estop_available() is False
    for r in (link.estop("why"), link.estop_reset()):
        assert r["ok"] is False and r["unavailable"] is True
        assert "nothing serves" in r["reason"]
    link.close()


def test_estop_from_any_viewer_banner_state_and_reset_needs_the_lock():
    bus = Bus()
    server = TriggerServer(bus)
    with serve_panel(bus, FakeClock(), "127.0.0.1", 0) as panel:
        url = panel.url
        a = b = None
        try:
            a, b = SSE(url), SSE(url)
            ca, cb, ta, tb = a.client, b.client, a.token, b.token
            assert post(url, "api/lock", {"token": ta})[0] == 200
            assert b.of("estop")[-1]["estop"] == {"available": False, "latched": False,
                                                  "reason": "", "t": None}
            # the arm driver comes up after the panel: the pages hear it within a second or so
            server.serve()
            wait_for(lambda: b.of("estop")[-1]["estop"]["available"], 5, "availability")
            # viewer B, without the lock, latches it; the reason names B
            code, r = post(url, "api/estop", {"token": tb, "reason": "cup  is\nslipping"})
            assert code == 200 and r["ok"] is True and "e-stop latched" in r["message"]
            kind, req = server.requests[-1]
            assert kind == "estop" and req["reason"] == (
                f"operator e-stop from the panel (viewer {cb}, without the control lock): "
                "cup is slipping")
            for s in (a, b):  # every page shows the banner
                wait_for(lambda s=s: s.of("estop")[-1]["estop"]["latched"], 5, "the latch")
            assert "cup is slipping" in a.of("estop")[-1]["estop"]["reason"]
            # an empty JSON POST (no token) is still an e-stop; an unknown token, or a
            # viewer's public id, is not echoed into the reason
            assert post(url, "api/estop", b"")[0] == 200
            assert post(url, "api/estop", {"token": "<b>x</b>", "client": cb})[0] == 200
            assert all(req.get("reason", "").startswith(
                "operator e-stop from the panel (a viewer, without the control lock)")
                for _, req in server.requests[-2:])
            # releasing needs the lock
            assert post(url, "api/estop_reset", {"token": tb})[0] == 403
            code, r = post(url, "api/message", {"token": tb, "text": "/estop-reset"})
            assert code == 403
            assert server.latched
            assert post(url, "api/estop_reset", {"token": ta}) == (
                200, {"ok": True, "reason": "", "message": "e-stop released"})
            for s in (a, b):
                wait_for(lambda s=s: not s.of("estop")[-1]["estop"]["latched"], 5, "the reset")
            # not latched any more: the driver's answer is passed on (409)
            code, r = post(url, "api/message", {"token": ta, "text": "/estop-reset"})
            assert code == 409 and r["reason"] == "e-stop was not latched"
            # /estop typed by the holder names it as holding control
            assert post(url, "api/message", {"token": ta, "text": "/estop"})[0] == 200
            assert server.requests[-1][1]["reason"] == (
                f"operator e-stop from the panel (viewer {ca}, holds control)")
            # a page opened now starts from the latched state
            c = SSE(url)
            try:
                wait_for(lambda: c.of("estop") and c.of("estop")[-1]["estop"]["latched"], 5,
                         "the snapshot")
            finally:
                c.close()
        finally:
            for s in (a, b):
                if s is not None:
                    s.close()
    assert panel.hub.pump_errors == 0


def test_a_lone_surrogate_never_breaks_a_page_stream():
    """A model's lone surrogate in the state or an event reaches every page as U+FFFD; the
    stream goes on."""
    link = FakeLink()
    with serve_panel(None, FakeClock(), "127.0.0.1", 0, link=link) as panel:
        s = SSE(panel.url)
        try:
            s.client  # noqa: B018 - connected
            link.emit("state", AgentState(3, "running", "pick \ud83d", (), (),
                                          ({"role": "agent", "text": "on it \ud83d"},)))
            link.emit("event", AgentEvent("2026-01-01T00:00:00Z", "run_ended",
                                          {"status": "failed", "summary": "x\ud83d"}))
            wait_for(lambda: s.of("event"), 5, "the event after the state")
            st = [m for m in s.of("state") if m["state"]["status"] == "running"][-1]
            assert st["state"]["task"] == "pick \ufffd"
            assert st["state"]["conversation"][0]["text"] == "on it \ufffd"
            assert "x\ufffd" in s.of("event")[-1]["event"]["text"]
            assert not s.closed and panel.hub.pump_errors == 0
            code, body, _ = get(panel.url, "api/state")
            assert code == 200 and "pick \ufffd" in body.decode("utf-8")
        finally:
            s.close()
