"""Helpers shared by the front-end tests (imported as ``ui_helpers``)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solarian_agent.testing.harness import Harness
from solarian_agent.ui.link import BusLink

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


class Stepper:
    """Steps ``h.runtime`` every ``period_s`` of wall time in a thread until stopped or
    ``max_s`` passed, so a FakeClock run moves at about real time while a browser watches."""

    def __init__(self, h: Harness, period_s: float = 0.02, max_s: float = 60.0) -> None:
        self.h = h
        self.period_s = period_s
        self.max_s = max_s
        self.stop_event = threading.Event()
        self.lock = threading.Lock()  # hold it to act on the harness between steps
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="harness-stepper", daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + self.max_s
        try:
            while not self.stop_event.is_set() and time.monotonic() < end:
                with self.lock:
                    self.h.runtime.step()
                self.stop_event.wait(self.period_s)
        except BaseException as e:  # reported by the test
            self.error = e

    def __enter__(self) -> Stepper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(5.0)


CHROMIUM = os.environ.get("SOLARIAN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SOLARIAN_CHROMEDRIVER", "/usr/bin/chromedriver")


def start_chromium(extra_args: tuple[str, ...] = ()) -> tuple[Any, str]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        import pytest

        pytest.fail(f"headless Chromium is needed for browser tests; missing {missing}: run "
                    "scripts/install_browser.sh (make test does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="solarian-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
              "--window-size=1440,1000", f"--user-data-dir={profile}", *extra_args):
        opts.add_argument(a)
    service = Service(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(10)
    return driver, profile


def quit_chromium(driver: Any, profile: str) -> None:
    try:
        driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(pred: Callable[[], Any], timeout_s: float = 10.0, what: str = "") -> Any:
    end = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or pred}")
        time.sleep(0.02)


def copy_to_docs(src: Path, name: str) -> None:
    """Refresh docs/img/<name> from a test screenshot when SOLARIAN_UPDATE_DOCS_IMG=1 (kept
    off by default so ``make test`` leaves the tree clean)."""
    if os.environ.get("SOLARIAN_UPDATE_DOCS_IMG") == "1":
        dst = REPO / "docs" / "img" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


class SSE:
    """A minimal server-sent-events reader over http.client, in a thread (test helper)."""

    def __init__(self, url: str, timeout_s: float = 10.0,
                 headers: dict[str, str] | None = None) -> None:
        import http.client
        import json
        import urllib.parse

        u = urllib.parse.urlsplit(url)
        self._json = json
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout_s)
        self.conn.request("GET", "/events", headers=headers or {})
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        assert self.resp.getheader("content-type", "").startswith("text/event-stream")
        self.messages: list[dict[str, Any]] = []
        self.closed = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while not self.closed:
                line = self.resp.readline()
                if not line:
                    break
                text = line.decode().rstrip("\n")
                if text.startswith("data: "):
                    self.messages.append(self._json.loads(text[6:]))
        except Exception:
            pass

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in list(self.messages) if m.get("type") == kind]

    @property
    def client(self) -> str:
        """This stream's public client id (from its hello)."""
        hello = wait_for(lambda: self.of("hello"), 5, "hello")
        return str(hello[0]["client"])

    @property
    def token(self) -> str:
        """This stream's secret token (from its hello, sent to it alone)."""
        hello = wait_for(lambda: self.of("hello"), 5, "hello")
        return str(hello[0]["token"])

    def close(self) -> None:
        import socket

        self.closed = True
        try:
            if self.sock is not None:  # wakes the reader blocked in readline
                self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5.0)
        try:
            self.resp.close()
            self.conn.close()
        except Exception:
            pass


def post(url: str, path: str, payload: Any, content_type: str = "application/json",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    import json
    import urllib.error
    import urllib.request

    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    req = urllib.request.Request(url + path, data=data,
                                 headers={"content-type": content_type, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def raw_request(url: str, method: str, path: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """One request exactly as given (curl-style: any Host, Origin, content type), over
    http.client; returns status, body and the response headers (lower-case names)."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request(method, path, body=body if body or method != "GET" else None,
                     headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def get(url: str, path: str) -> tuple[int, bytes, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url + path, timeout=10) as r:
            return r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("content-type", "")


def _png_square(h: int, w: int, box: tuple[int, int, int, int]) -> str:
    import base64

    import cv2
    import numpy as np

    m = np.zeros((h, w), np.uint8)
    m[box[1]:box[3], box[0]:box[2]] = 255
    ok, buf = cv2.imencode(".png", m)
    assert ok
    return base64.b64encode(buf.tobytes()).decode()


class TriggerServer:
    """An e-stop on a bare Bus, as the arm driver serves it: latched, announced as operator
    events; every request recorded."""

    def __init__(self, bus: Any) -> None:
        from solarian_agent.core import names
        from solarian_agent.core.messages import OperatorEvent

        self.requests: list[tuple[str, Any]] = []
        self.latched = False
        pub = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)

        def estop(req: Any) -> dict[str, Any]:
            self.requests.append(("estop", req))
            newly, self.latched = not self.latched, True
            if newly:
                pub.publish(OperatorEvent("estop", {"reason": req.get("reason", "")}, 1.0))
            return {"success": True, "message": f"e-stop latched: {req.get('reason', '')}"}

        def reset(req: Any) -> dict[str, Any]:
            self.requests.append(("estop_reset", req))
            was, self.latched = self.latched, False
            if was:
                pub.publish(OperatorEvent("estop_reset", {}, 2.0))
            return {"success": was, "message": "e-stop released" if was
                    else "e-stop was not latched"}

        self.serve = lambda: (bus.create_service(names.ESTOP, names.T_TRIGGER, estop),
                              bus.create_service(names.ESTOP_RESET, names.T_TRIGGER, reset))


class ChatLink:
    """An AgentLink for the terminal chat's tests: the callbacks it was given, by kind, and a
    fixed answer to every message."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.cbs: dict[str, Any] = {}
        self.answer = answer or {"ok": False, "reason": "the agent is not running"}

    def on_state(self, cb: Any) -> None:
        self.cbs["state"] = cb

    def on_event(self, cb: Any) -> None:
        self.cbs["event"] = cb

    def on_operator(self, cb: Any) -> None:
        self.cbs["operator"] = cb

    def message(self, text: str) -> dict[str, Any]:
        return dict(self.answer)


class RecordingLink(BusLink):
    """The real BusLink whose agent commands are recorded instead of sent."""

    def __init__(self, bus: Any) -> None:
        super().__init__(bus, [])
        self.sent: list[tuple[str, str]] = []

    def message(self, text: str) -> dict[str, Any]:
        self.sent.append(("message", text))
        return {"ok": True, "reason": ""}

    def cancel(self, by: str = "operator") -> dict[str, Any]:
        self.sent.append(("cancel", by))
        return {"ok": True, "reason": ""}

    def reset(self, by: str = "operator") -> dict[str, Any]:
        self.sent.append(("reset", by))
        return {"ok": True, "reason": ""}


def make_demo_episode(root: Path, *, bag_where: str = "robot") -> Path:
    """Run a short scripted episode on the toy harness, logging under
    ``root/controller`` and recording a rosbag2 bag of the bus; returns the episode dir.

    The episode has planner turns (one shows an image), a plan, a monitor answer and a monitor
    decision, an operator takeover and the resume, overlays on the camera frames, and
    ``finish_task``.  ``bag_where``: ``robot`` (the robot's recording of the same session),
    ``episode`` (inside the episode dir) or ``none``.
    """
    from solarian_agent.core import names
    from solarian_agent.core.messages import MonitorVerdict, OperatorEvent
    from solarian_agent.core.model_api import ModelRequest
    from solarian_agent.models.scripted import reply
    from solarian_agent.rosmsg.bag import BagRecorder
    from solarian_agent.testing.harness import make_harness

    def newest(req: ModelRequest) -> str:
        return [p.observation_id for m in req.messages for p in m.content
                if getattr(p, "observation_id", "")][-1]

    h = make_harness([
        lambda req: reply("I'll touch the red square, then spin until the monitor is happy.",
                          ("update_plan", {"steps": [
                              {"description": "touch the red square", "tool": "point_at"},
                              {"description": "spin", "tool": "spin", "args": {}},
                              {"description": "check the square"}]}),
                          ("point_at", {"point": [400, 300], "observation_id": newest(req)})),
        reply("Let me look.", ("observe", {})),
        reply("Looks right; waiting a moment to be sure.", ("wait", {"seconds": 2})),
        reply("Done: the square was touched.",
              ("finish_task", {"summary": "touched the red square", "success": True})),
    ], log_root=root / "controller")
    verdicts = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    operator = h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT)
    tmp_bag = root / "bag.tmp"
    rec = BagRecorder(tmp_bag, storage="mcap")  # on the wall clock: the viewer aligns it
    rec.attach(h.bus)
    h.say("touch the red square")
    assert h.run_until(lambda: any(a.tool == "spin" for a in h.planner.actions.values()), 10)
    spin = next(a for a, i in h.planner.actions.items() if i.tool == "spin")
    log = h.planner.log
    assert log is not None
    mask = _png_square(480, 640, (390, 290, 410, 310))
    for k in range(40):  # overlays on each new frame while the spinner runs
        f = h.robot.frames_published[-1]
        log.overlay("cam", "target", {"ts": f.stamp, "size": [480, 640], "target": {
            "mask": mask, "box": [390, 290, 410, 310]}})
        log.overlay("cam", "grip", {"ts": f.stamp, "size": [480, 640],
                                    "grip": {"point": [300 + 2 * k, 200, 90]}})
        if k == 10:
            verdicts.publish(MonitorVerdict(spin, "spin", "is the spinner turning?", "yes", 0.9,
                                            stamp=h.clock.now()))
        if k == 30:
            verdicts.publish(MonitorVerdict(spin, "spin", "is the spin done?", "yes", 0.97,
                                            decision="finish", reason="it stopped on target",
                                            stamp=h.clock.now()))
        h.runtime.step()
    assert h.run_until(lambda: any(a.tool == "wait" for a in h.planner.actions.values()), 10)
    h.runtime.run_for(0.5)
    operator.publish(OperatorEvent("teleop", {"joint": "j", "delta": 0.2}, h.clock.now()))
    assert h.run_until(lambda: h.planner.status == "paused", 5)
    h.runtime.run_for(1.0)
    h.say("carry on")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10), h.planner.status
    h.runtime.run_for(0.5)
    rec.close()
    assert h.recorder is not None and h.recorder.current is not None
    logs = h.recorder.current.dir
    h.recorder.close()
    episode = logs.parent
    if bag_where == "robot":
        session, ep = episode.parent.parent.name, episode.name
        dest = root / "robot" / session / "episodes" / ep / "rosbag"
        dest.parent.mkdir(parents=True)
        tmp_bag.rename(dest)
    elif bag_where == "episode":
        tmp_bag.rename(episode / "rosbag")
    else:
        shutil.rmtree(tmp_bag)
    return episode
