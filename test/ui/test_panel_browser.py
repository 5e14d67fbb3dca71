"""The operator panel in a real headless Chromium: the page loads, a typed task reaches the
harness, the plan appears, the running action shows its elapsed time and monitor verdict,
Cancel stops it, and a screenshot is saved under test-artifacts/; E-STOP from a viewer
without the lock latches the simulated robot's e-stop until Reset e-stop."""

from __future__ import annotations

import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from ui_helpers import Stepper, copy_to_docs, wait_for

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import MonitorVerdict, OperatorEvent
from solarian_agent.core.model_api import ModelRequest
from solarian_agent.core.skill import Tool
from solarian_agent.core.transport import Bus
from solarian_agent.models.scripted import reply
from solarian_agent.testing.harness import DEFAULT_TOOLS, Spin, make_harness
from solarian_agent.ui.panel import serve_panel

pytestmark = pytest.mark.browser


class LongSpin(Spin):
    description = "Keep the spinner going until stopped (test skill)."
    max_duration_s = 120.0


TOOLS = {**DEFAULT_TOOLS, "spin": Tool(LongSpin)}
TASK = "touch the red square, then keep the spinner going"


def newest_obs(req: ModelRequest) -> str:
    ids = [p.observation_id for m in req.messages for p in m.content
           if getattr(p, "observation_id", "")]
    return ids[-1]


def script() -> list:
    return [lambda req: reply(
        "I'll touch the red square, then keep the spinner going until you stop it.",
        ("update_plan", {"steps": [
            {"description": "touch the red square", "tool": "point_at"},
            {"description": "keep the spinner going", "tool": "spin", "args": {}},
            {"description": "check the square in a fresh image"}]}),
        ("point_at", {"point": [400, 300], "observation_id": newest_obs(req)}))]


def text(driver, css: str) -> str:
    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))


def test_panel_in_chromium(browser, artifacts, tmp_path):
    h = make_harness(script(), tools=TOOLS, log_root=tmp_path)
    with Stepper(h, max_s=60) as stepper:
        panel = serve_panel(h.bus, h.clock, "127.0.0.1", 0)
        try:
            d = browser
            d.get(panel.url)
            # the page loads, connects and takes the free control lock
            wait_for(lambda: d.find_element(By.ID, "conn").get_attribute("data-ok") == "true",
                     10, "the event stream")
            wait_for(lambda: d.find_element(By.ID, "lock").get_attribute("data-mine") == "true",
                     10, "the control lock")
            wait_for(lambda: d.find_element(By.ID, "cam-cam_image_raw").get_attribute("data-seq"),
                     10, "a camera frame")
            # a typed task reaches the harness
            box = d.find_element(By.ID, "input")
            box.send_keys(TASK)
            box.send_keys(Keys.ENTER)
            wait_for(lambda: h.planner.task == TASK, 10, "the task to reach the planner")
            wait_for(lambda: h.provider.calls, 10, "the planner call")
            # the plan appears, with each step's state
            wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#plan li[data-step]")) == 3,
                     10, "the plan")
            assert "touch the red square" in text(d, "#plan")
            # the plan queue started the spinner by itself; it shows as running
            wait_for(lambda: d.find_elements(
                By.CSS_SELECTOR, '#actions li[data-tool="spin"]'), 15, "the running spin")
            wait_for(lambda: d.find_elements(
                By.CSS_SELECTOR, '#plan li[data-step="2"][data-status="running"]'), 5,
                "step 2 running")
            action_id = next(a for a, i in h.planner.actions.items() if i.tool == "spin")
            with stepper.lock:
                h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT).publish(
                    MonitorVerdict(action_id, "spin", "is the spinner turning?", "yes", 0.93,
                                   stamp=h.clock.now()))
            wait_for(lambda: "is the spinner turning?" in text(d, "#actions .verdict"), 5,
                     "the monitor verdict")
            # elapsed time advances while it runs
            wait_for(lambda: float(d.find_element(
                By.CSS_SELECTOR, f'.elapsed[data-action="{action_id}"]').text.split()[0]) >= 1.0,
                10, "elapsed time")
            # agent/view: the image the planner pointed in, with its point marked
            wait_for(lambda: d.find_element(By.ID, "view").get_attribute("data-seq"), 10,
                     "the agent view")
            assert "I'll touch the red square" in text(d, "#conversation .msg")
            assert "plan:" in text(d, "#events li")
            shot = artifacts / "panel.png"
            d.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
            copy_to_docs(shot, "panel.png")
            # Cancel stops the running action
            d.find_element(By.ID, "cancel").click()
            wait_for(lambda: h.planner.status == "cancelled" and not h.planner.actions, 10,
                     "the run to be cancelled")
            wait_for(lambda: d.find_element(By.ID, "status").get_attribute("data-status")
                     == "cancelled", 10, "the page to show the cancel")
            wait_for(lambda: not d.find_elements(By.CSS_SELECTOR, '#actions li[data-tool]'),
                     10, "the action list to empty")
            # an operator takeover shows as soon as it happens
            with stepper.lock:
                h.bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT).publish(
                    OperatorEvent("teleop", {"joint": "j", "delta": 0.1}, h.clock.now()))
            wait_for(lambda: d.find_element(By.ID, "takeover").is_displayed(), 10,
                     "the takeover banner")
            assert "teleop" in d.find_element(By.ID, "takeover").text
            d.save_screenshot(str(artifacts / "panel_takeover.png"))
        finally:
            panel.stop()
    assert stepper.error is None, stepper.error
    assert panel.hub.pump_errors == 0
    log = h.recorder.current.dir / "events.jsonl" if h.recorder and h.recorder.current else None
    assert log is not None
    body = log.read_text()
    assert '"kind": "action_ended"' in body and '"outcome": "stopped"' in body


def test_panel_on_the_simulated_robot(browser, artifacts):
    """The panel over the embedded default (simulator, rules planner, real time): the task
    typed in the page is planned and run; Cancel stops it mid-action."""
    import threading

    from solarian_agent.system import build_sim_system

    system = build_sim_system(seed=7, realtime=True, log_root=None)
    stop = system.runtime.stop_event
    errors: list[BaseException] = []

    def spin() -> None:
        try:
            end = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < end:
                system.runtime.step()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    panel = serve_panel(system.bus, system.clock, "127.0.0.1", 0)
    try:
        d = browser
        d.get(panel.url)
        wait_for(lambda: d.find_element(By.ID, "lock").get_attribute("data-mine") == "true",
                 10, "the control lock")
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#cameras img[data-seq]")) >= 2,
                 10, "the camera views")
        box = d.find_element(By.ID, "input")
        box.send_keys("put the red cup on the tray and the yellow paper in the bin")
        box.send_keys(Keys.ENTER)
        wait_for(lambda: len(d.find_elements(By.CSS_SELECTOR, "#plan li[data-step]")) >= 4, 15,
                 "the plan")
        wait_for(lambda: d.find_elements(By.CSS_SELECTOR, '#plan li[data-status="done"]')
                 and d.find_elements(By.CSS_SELECTOR, "#actions li[data-tool]"), 20,
                 "a step done and the next running")
        wait_for(lambda: d.find_element(By.ID, "view").get_attribute("data-seq"), 10,
                 "the agent view")
        shot = artifacts / "panel_sim.png"
        d.save_screenshot(str(shot))
        copy_to_docs(shot, "panel.png")
        d.find_element(By.ID, "cancel").click()
        wait_for(lambda: system.planner.status == "cancelled" and not system.planner.actions,
                 10, "the cancel")
        wait_for(lambda: d.find_element(By.ID, "status").get_attribute("data-status")
                 == "cancelled" and not d.find_elements(By.CSS_SELECTOR,
                                                        "#actions li[data-tool]"), 10,
                 "the page to show it")
    finally:
        panel.stop()
        stop.set()
        thread.join(5)
        system.shutdown()
    assert not errors, errors
    assert panel.hub.pump_errors == 0


def test_estop_from_a_viewer_without_the_lock_on_the_simulated_robot(browser, artifacts):
    """E-STOP is a safety command: a page WITHOUT the control lock presses it while a skill
    runs on the simulated robot; the skill ends stopped, every page shows the latched banner,
    a new task's skill is refused while it is latched, and Reset e-stop (with the lock)
    clears it, after which a task runs again."""
    import threading

    from ui_helpers import SSE, post

    from solarian_agent.system import build_sim_system

    system = build_sim_system(seed=7, realtime=True, log_root=None)
    stop = system.runtime.stop_event
    errors: list[BaseException] = []

    def spin() -> None:
        try:
            end = time.monotonic() + 90
            while not stop.is_set() and time.monotonic() < end:
                system.runtime.step()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    panel = serve_panel(system.bus, system.clock, "127.0.0.1", 0)
    holder = None
    try:
        url = panel.url
        # another viewer holds the control lock; the browser's page is only a viewer
        holder = SSE(url)
        ch = holder.token
        assert post(url, "api/lock", {"token": ch})[0] == 200
        d = browser
        d.get(panel.url)
        cb = wait_for(lambda: d.find_element(By.TAG_NAME, "body").get_attribute("data-client"),
                      10, "the page's client id")
        wait_for(lambda: d.find_element(By.ID, "lock").text.startswith("Viewing"), 10,
                 "the page to be a viewer")
        assert d.find_element(By.ID, "lock").get_attribute("data-mine") == "false"
        estop = d.find_element(By.ID, "estop")
        assert estop.is_displayed() and estop.is_enabled() and estop.text == "E-STOP"
        assert not d.find_element(By.ID, "estop-banner").is_displayed()
        # the holder starts a task; the page sees its skill running
        task = "put the red cup on the tray and the yellow paper in the bin"
        assert post(url, "api/message", {"token": ch, "text": task})[0] == 200
        wait_for(lambda: d.find_elements(By.CSS_SELECTOR, "#actions li[data-tool]"), 20,
                 "a running skill")
        wait_for(lambda: system.executor.running, 5, "the executor's skill")
        # the viewer without the lock presses E-STOP
        estop.click()
        wait_for(lambda: system.sim.latch.tripped, 5, "the simulator's latch")
        assert system.sim.latch.reason == (
            f"operator e-stop from the panel (viewer {cb}, without the control lock)")
        # the running skill ends stopped
        wait_for(lambda: not system.executor.running and not system.planner.actions, 10,
                 "the skill to stop")
        wait_for(lambda: any("stopped: operator estop" in e.text for e in d.find_elements(
            By.CSS_SELECTOR, '#events li[data-kind="action_ended"]')), 10,
            "the page to show the skill stopped")
        assert system.executor.estop_latched
        wait_for(lambda: d.find_elements(By.CSS_SELECTOR, '#plan li[data-status="stopped"]'),
                 5, "its plan step to show stopped")
        wait_for(lambda: not d.find_elements(By.CSS_SELECTOR, '#plan li[data-status="running"]'),
                 5, "no plan step still running")
        # the banner shows, with the reason naming the viewer
        banner = wait_for(lambda: d.find_element(By.ID, "estop-banner").is_displayed()
                          and d.find_element(By.ID, "estop-banner"), 10, "the banner")
        assert "E-STOP LATCHED" in banner.text and cb in banner.text
        assert d.find_element(By.TAG_NAME, "body").get_attribute("data-estop") == "latched"
        assert not d.find_element(By.ID, "estop-reset").is_enabled()  # needs the lock
        wait_for(lambda: "reset the e-stop" in d.find_element(By.ID, "takeover-hint").text, 5,
                 "the paused run's hint to mention the e-stop")
        d.save_screenshot(str(artifacts / "panel_estop.png"))
        wait_for(lambda: holder.of("estop") and holder.of("estop")[-1]["estop"]["latched"], 5,
                 "the other viewer to see the latch")
        # while latched the message box is off, with the reason, and Resume too; a message
        # sent anyway is refused by the server (the run would resume into refused skills)
        box = d.find_element(By.ID, "input")
        assert not box.is_enabled() and not d.find_element(By.ID, "send").is_enabled()
        blocked = d.find_element(By.ID, "blocked")
        assert blocked.is_displayed() and "E-stop latched" in blocked.text and cb in blocked.text
        assert not d.find_element(By.ID, "resume").is_enabled()
        code, r = post(url, "api/message", {"token": ch, "text": "continue"})
        assert code == 409 and r.get("estop") and "e-stop is latched" in r["reason"], r
        code, r = post(url, "api/resume", {"token": ch})
        assert code == 409 and "e-stop is latched" in r["reason"], r
        time.sleep(0.5)  # (nothing must happen: no run resumes, no skill starts)
        assert system.planner.status == "paused" and not system.executor.running
        assert post(url, "api/cancel", {})[0] == 200
        wait_for(lambda: system.planner.status == "cancelled", 10, "the cancel")
        assert d.find_element(By.ID, "estop-banner").is_displayed()
        # without the lock the page cannot reset it; once the holder leaves, the page takes
        # the lock and Reset e-stop clears the latch and the banner
        holder.close()
        wait_for(lambda: d.find_element(By.ID, "lock").get_attribute("data-mine") == "true",
                 10, "the page to take the free lock")
        wait_for(lambda: d.find_element(By.ID, "estop-reset").is_enabled(), 5,
                 "Reset e-stop to be enabled")
        d.find_element(By.ID, "estop-reset").click()
        wait_for(lambda: not system.sim.latch.tripped and not system.executor.estop_latched,
                 10, "the release")
        wait_for(lambda: not d.find_element(By.ID, "estop-banner").is_displayed(), 10,
                 "the banner to go")
        assert d.find_element(By.TAG_NAME, "body").get_attribute("data-estop") == "clear"
        # skills run again: a new task from the page starts one
        wait_for(lambda: d.find_element(By.ID, "input").is_enabled(), 5, "the message box")
        assert not d.find_element(By.ID, "blocked").is_displayed()
        box = d.find_element(By.ID, "input")
        box.send_keys("put the red cup on the tray")
        box.send_keys(Keys.ENTER)
        wait_for(lambda: system.executor.running, 15, "a skill to start after the reset")
        d.find_element(By.ID, "cancel").click()
        wait_for(lambda: system.planner.status == "cancelled" and not system.planner.actions,
                 10, "the final cancel")
    except AssertionError:
        browser.save_screenshot(str(artifacts / "panel_estop_failed.png"))
        raise
    finally:
        if holder is not None:
            holder.close()
        panel.stop()
        stop.set()
        thread.join(5)
        system.shutdown()
    assert not errors, errors
    assert panel.hub.pump_errors == 0


def test_the_header_says_whether_the_robot_is_ready(browser):
    robot = {"name": "so101", "ready": False, "checked_at": "2026-12-06T10:05:00+00:00",
             "threshold_mm": 5.0, "worst_mm": {"overhead": 2.0, "wrist": 7.5},
             "missing_steps": []}
    bus = Bus()
    with serve_panel(bus, FakeClock(), "127.0.0.1", 0, robot=robot) as panel:
        browser.get(panel.url)
        wait_for(lambda: browser.find_element(By.ID, "robot").get_attribute("data-ready")
                 == "false", 10, "the robot's readiness")
        assert text(browser, "#robot") == "robot not ready (overhead 2 mm, wrist 7.5 mm; over " \
                                          "5 mm)"
    with serve_panel(bus, FakeClock(), "127.0.0.1", 0,
                     robot={**robot, "ready": True, "worst_mm": {"overhead": 1.3}}) as panel:
        browser.get(panel.url)
        wait_for(lambda: browser.find_element(By.ID, "robot").get_attribute("data-ready")
                 == "true", 10, "the robot's readiness")
        assert text(browser, "#robot") == "robot ready (overhead 1.3 mm)"
