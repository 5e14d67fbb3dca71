"""The operator on the live graph, over real rclpy: ``sim.launch.py``'s nodes with
``panel:=true`` (the panel as a node of the graph, ``ros/panel.py`` on ``ros/ui_link.py``) in a
namespace, driven from a real headless Chromium: a task typed in the page tidies the table
(the simulator's truth confirms); Pause stops the running skill and pauses the run, Resume
resumes it, Take over pauses it and tells the planner the operator's note; E-STOP latches the
simulator's e-stop, the message box is disabled with the reason, Reset e-stop releases it.
And ``solarian-agent chat --ros``: the embedded chat's commands over the same graph."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _rostest_util import NodeProcesses, Probe, wait_until

from solarian_agent.ros import launch_plan
from solarian_agent.ros.components import share_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ui"))
from ui_helpers import ARTIFACTS, quit_chromium, start_chromium  # noqa: E402

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.browser,
              pytest.mark.timeout(600)]

NS = "op1"
TASK = "put the red cup on the tray and the yellow paper in the bin"


@pytest.fixture(scope="module")
def graph(real_ros, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("operator")
    g = NodeProcesses(tmp, namespace=NS)
    args = {"planner_provider": "rules", "seed": "1", "namespace": NS, "panel": "true",
            "panel_port": "0"}
    g.start_plan(launch_plan.sim_plan(args, share_dir()))
    probe = Probe(g.domain)
    try:
        nodes = [f"/{NS}/{n}" for n in ("sim_world", "skills", "monitor", "planner", "panel")]
        missing = probe.wait_for_nodes(nodes, 90.0)
        assert not missing, f"nodes missing: {missing}\n{g.outputs()}"
        assert g.procs[f"{NS}/planner"].wait_for_output("planner running", 90.0), g.outputs()
        panel = g.procs[f"{NS}/panel"]
        assert panel.wait_for_output("panel running", 60.0), g.outputs()
        m = re.search(r"operator panel on (http://127\.0\.0\.1:\d+/)", panel.output())
        assert m, panel.output()
        yield g, probe, m.group(1)
    finally:
        probe.close()
        codes = g.close()
        assert codes.get(f"{NS}/panel") == 0, g.outputs()  # SIGINT: the panel exits cleanly


@pytest.fixture
def page(graph):
    driver, profile = start_chromium()
    try:
        yield driver
    finally:
        quit_chromium(driver, profile)


def _wait(pred, timeout_s, what, g=None):
    from selenium.common.exceptions import StaleElementReferenceException

    def check():
        try:
            return pred()
        except StaleElementReferenceException:  # the page re-rendered the list meanwhile
            return False

    assert wait_until(check, timeout_s, 0.1), f"timed out waiting for {what}" + (
        f"\n{g.outputs()}" if g is not None else "")


def _texts(d, selector):
    """The text of every element ``selector`` matches, read in one script (never stale)."""
    return d.execute_script("return Array.from(document.querySelectorAll(arguments[0]))"
                            ".map(e => e.textContent)", selector)


def _attr(d, elem_id, name):
    from selenium.webdriver.common.by import By

    return d.find_element(By.ID, elem_id).get_attribute(name)


def _status(d):
    return _attr(d, "status", "data-status")


def _type(d, text):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = d.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def _open(d, url, g, p):
    from selenium.webdriver.common.by import By

    p.call("std_srvs/srv/Trigger", f"{NS}/estop_reset")  # whatever a test before left latched
    d.get(url)
    _wait(lambda: _attr(d, "lock", "data-mine") == "true", 20, "the control lock", g)
    _wait(lambda: len(d.find_elements(By.CSS_SELECTOR, "#cameras img[data-seq]")) >= 2, 20,
          "both camera views over ROS", g)
    _wait(lambda: _status(d) not in ("connecting", "unknown", ""), 20, "the agent's state", g)


class Terminal:
    """A command run with its stdin a pipe and its output read as it comes."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.out: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)

    def text(self):
        return "".join(self.out)

    def type(self, line):
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, text, timeout_s=20.0):
        assert wait_until(lambda: text in self.text(), timeout_s, 0.05), (text, self.text())

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def test_chat_over_ros_has_the_embedded_chats_commands(graph):
    g, p, _ = graph
    env = g.env()  # the graph's domain and DDS profile, as its nodes have them
    t = Terminal([sys.executable, "-m", "solarian_agent.cli", "chat", "--ros", "--namespace",
                  NS, "--no-color"], env)
    try:
        t.wait_for("Type a task for the agent; /help for commands.", 30)
        t.type("/help")
        t.wait_for("/takeover [note]")
        assert "/estop [reason]" in t.text() and "/state" in t.text()
        end = time.monotonic() + 20  # the chat's node discovers the graph meanwhile
        while "status: " not in t.text() and time.monotonic() < end:
            t.type("/state")
            time.sleep(0.5)
        assert "status: " in t.text(), t.text()
        t.type("/bogus thing")
        t.wait_for("unknown command /bogus; /help lists them")
        # a message goes to the planner over agent/message; its reply comes back on agent/state
        t.type("hello there")
        t.wait_for("agent: I can tidy the table when told what goes where", 30)
        t.type("/cancel")
        t.wait_for("→ cancelled]", 20)
        # /takeover [note]: an operator event on the graph
        t.type("/takeover I moved the cup")
        t.wait_for("operator takeover sent")
        # the planner was told: its operator_takeover event, with the note, in the chat's lines
        t.wait_for('operator took over: takeover (chat): "I moved the cup"', 20)
        # /estop latches the simulator's e-stop (its answer, then its operator event; a
        # std_srvs/Trigger carries no reason); a message is not sent while it is latched;
        # /estop-reset releases it
        # on a loaded machine the chat's node may not have discovered the simulator's estop
        # server yet: it then answers "e-stop unavailable" (right: nothing served it); once
        # discovered, /estop latches
        end = time.monotonic() + 30
        while True:
            seen = t.text().count("nothing serves 'estop'")
            t.type("/estop from the test")
            if wait_until(lambda seen=seen: "*** E-STOP LATCHED: " in t.text()
                          or t.text().count("nothing serves 'estop'") > seen, 20, 0.05) \
                    and "*** E-STOP LATCHED: " in t.text():
                break
            assert time.monotonic() < end, ("the e-stop never latched", t.text())
            time.sleep(1.0)
        t.type("put the red cup on the tray")
        t.wait_for("not sent: the e-stop is latched")
        t.type("/estop-reset")
        t.wait_for("*** e-stop released ***", 20)
        t.type("/quit")
        assert t.proc.wait(20) == 0, t.text()
    finally:
        t.close()
    assert "Traceback" not in t.text()


def test_panel_ros_from_the_command_line_attaches_to_the_graph(graph):
    """``solarian-agent panel --ros``: the same page from a terminal, on the graph's state, its
    cameras and its e-stop; Ctrl-C ends it with 130 and no traceback."""
    import signal
    import urllib.request

    g, p, _ = graph
    env = g.env()  # the graph's domain and DDS profile, as its nodes have them
    t = Terminal([sys.executable, "-m", "solarian_agent.cli", "panel", "--ros", "--namespace",
                  NS, "--port", "0"], env)
    try:
        t.wait_for("operator panel on http://127.0.0.1:", 60)
        m = re.search(r"operator panel on (http://127\.0\.0\.1:\d+/)", t.text())
        assert m, t.text()

        def state():
            with urllib.request.urlopen(m.group(1) + "api/state", timeout=5) as r:
                return json.loads(r.read())

        _wait(lambda: state()["state"]["status"] not in ("connecting", ""), 30,
              "the graph's agent/state in the panel", g)
        _wait(lambda: state()["estop"]["available"], 30, "the simulator's e-stop", g)
        with urllib.request.urlopen(m.group(1) + "api/state", timeout=5) as r:
            assert r.status == 200
        os.killpg(t.proc.pid, signal.SIGINT)
        assert t.proc.wait(30) == 130, t.text()
    finally:
        t.close()
    assert "Traceback" not in t.text(), t.text()


def test_a_task_typed_in_the_page_tidies_the_table(graph, page):
    from selenium.webdriver.common.by import By

    g, p, url = graph
    d = page
    _open(d, url, g, p)
    _type(d, TASK)
    # the typed message shows at once (pending until the planner's state has it)
    _wait(lambda: any(TASK in t for t in _texts(d, '#conversation .msg[data-role="user"]')),
          10, "the message", g)
    _wait(lambda: len(d.find_elements(By.CSS_SELECTOR, "#plan li[data-step]")) >= 4, 30,
          "the plan", g)
    _wait(lambda: d.find_elements(By.CSS_SELECTOR, "#actions li[data-tool]"), 30,
          "a running skill", g)
    _wait(lambda: _attr(d, "view", "data-seq"), 30, "agent/view over ROS", g)
    _wait(lambda: _status(d) == "succeeded", 240, "the run to succeed", g)
    steps = d.execute_script("return Array.from(document.querySelectorAll('#plan li[data-step]'))"
                             ".map(e => [e.textContent, e.dataset.status])")
    assert steps and all(st == "done" for _, st in steps), steps
    assert not d.find_elements(By.CSS_SELECTOR, '#conversation .msg[data-pending="true"]')
    (truth,) = p.messages("solarian_agent/msg/SimTruth", f"{NS}/sim/ground_truth", "latched")
    t = json.loads(truth.truth_json)
    assert t["in_tray"] == ["red_cup"] and t["in_bin"] == ["yellow_paper"], t["objects"]
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "panel_ros_tidy.png"))


def _skill_events(p):
    return p.listen("solarian_agent/msg/AgentEvent", f"{NS}/skills/events")


def _kinds(events, kind):
    return [json.loads(e.data_json) for e in list(events) if e.kind == kind]


def test_pause_resume_take_over_and_estop_from_the_page(graph, page):
    from selenium.webdriver.common.by import By

    g, p, url = graph
    r = p.call("solarian_agent/srv/SimReset", f"{NS}/sim/reset", seed=2, use_seed=True)
    assert r.ok, r.message
    events = _skill_events(p)
    d = page
    _open(d, url, g, p)
    _type(d, TASK)
    _wait(lambda: _kinds(events, "skill_started"), 60, "a skill to start", g)
    # the page shows the run and its skill (Pause is on while the run is active)
    _wait(lambda: _status(d) == "running" and d.find_element(By.ID, "pause").is_enabled(), 30,
          "the page to show the running run", g)
    _wait(lambda: d.find_elements(By.CSS_SELECTOR, "#actions li[data-tool]"), 30,
          "a running skill on the page", g)
    # Pause (any viewer): the running skill stops at the next tick, the run pauses
    d.find_element(By.ID, "pause").click()

    def paused_skill():
        return [e for e in _kinds(events, "skill_ended")
                if e["outcome"] == "stopped" and "operator pause" in e["reason"]]

    _wait(paused_skill, 20, "a skill stopped by the operator pause", g)
    started = {e["action_id"] for e in _kinds(events, "skill_started")}
    assert paused_skill()[0]["action_id"] in started
    _wait(lambda: _status(d) == "paused", 20, "the page to show the pause", g)
    assert d.find_element(By.ID, "takeover").is_displayed()
    assert "Paused by the operator" in d.find_element(By.ID, "takeover").text
    # Resume: the run goes on, a skill starts again
    _wait(lambda: d.find_element(By.ID, "resume").is_enabled(), 10, "Resume enabled", g)
    n = len(_kinds(events, "skill_started"))
    d.find_element(By.ID, "resume").click()
    _wait(lambda: _status(d) == "running", 20, "the run to resume", g)
    _wait(lambda: len(_kinds(events, "skill_started")) > n, 60, "a skill after the resume", g)
    # Take over with a note from the message box: paused, and the planner is told the note
    d.find_element(By.ID, "input").send_keys("I moved the cup by hand")
    d.find_element(By.ID, "takeover-btn").click()
    _wait(lambda: _status(d) == "paused", 20, "the takeover to pause the run", g)
    _wait(lambda: any("I moved the cup by hand" in t for t in _texts(
        d, '#events li[data-kind="operator_takeover"]')), 20,
        "the planner's operator_takeover event with the note", g)
    assert "I moved the cup by hand" in d.find_element(By.ID, "takeover").text
    assert d.find_element(By.ID, "input").get_attribute("value") == ""
    # E-STOP: the simulator's latch; the message box is off with the reason until the reset
    d.find_element(By.ID, "estop").click()
    _wait(lambda: d.find_element(By.ID, "estop-banner").is_displayed(), 20, "the banner", g)
    _wait(lambda: not d.find_element(By.ID, "input").is_enabled(), 10, "the box disabled", g)
    assert "E-stop latched" in d.find_element(By.ID, "blocked").text
    assert not d.find_element(By.ID, "resume").is_enabled()
    d.find_element(By.ID, "estop-reset").click()
    _wait(lambda: not d.find_element(By.ID, "estop-banner").is_displayed(), 20,
          "the release", g)
    _wait(lambda: d.find_element(By.ID, "input").is_enabled(), 10, "the box enabled", g)
    # internal routing lines are hidden unless asked
    shown = ("return Array.from(document.querySelectorAll('#events li[data-internal=\"true\"]'))"
             ".map(e => e.offsetParent !== null)")
    internal = d.execute_script(shown)
    assert internal and not any(internal), internal
    d.find_element(By.ID, "show-internal").click()
    assert any(d.execute_script(shown))
    d.find_element(By.ID, "cancel").click()
    _wait(lambda: _status(d) == "cancelled", 20, "the cancel", g)
    d.save_screenshot(str(ARTIFACTS / "panel_ros_operator.png"))
