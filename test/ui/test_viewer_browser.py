"""The episode viewer in a real headless Chromium: frames drawn, overlays toggled with o,
a planner turn opened by a click, playback; a screenshot under test-artifacts/."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from ui_helpers import copy_to_docs, make_demo_episode, wait_for

from solarian_agent.ui.viewer import main_view_episode

pytestmark = pytest.mark.browser

_STATS = """
const c = document.querySelector(arguments[1] ||
                                 '#videos canvas[data-topic="' + arguments[0] + '"]');
const a = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
let sum = 0, lit = 0;
for (let i = 0; i < a.length; i += 4) { const v = (a[i] + a[i + 1] + a[i + 2]) / 3; sum += v;
  if (a[i + 3] > 0 && v > 30) lit++; }
return {mean: sum / (a.length / 4), lit: lit / (a.length / 4), pixels: Array.from(a)};
"""
_DIFF = """
const [p, q] = arguments; let n = 0;
for (let i = 0; i < p.length; i += 4)
  if (Math.abs(p[i] - q[i]) + Math.abs(p[i + 1] - q[i + 1])
      + Math.abs(p[i + 2] - q[i + 2]) > 30) n++;
return n / (p.length / 4);
"""

_MASK_AREA = """
const D = JSON.parse(document.getElementById("data").textContent);
const c = document.querySelector('#videos canvas[data-topic="' + arguments[0] + '"]');
const cam = D.cameras.find((x) => x.topic === arguments[0]);
let area = 0;
for (const o of cam.frames[Number(c.dataset.frame)][2]) {
  const ov = D.overlays[o], sx = c.width / ov.size[1], sy = c.height / ov.size[0];
  for (const s of ov.shapes) for (const p of s.polys || []) {
    let a = 0;
    for (let i = 0; i < p.length; i++) { const [x0, y0] = p[i], [x1, y1] = p[(i + 1) % p.length];
      a += x0 * y1 - x1 * y0; }
    area += Math.abs(a) / 2 * sx * sy;
  }
}
return area / (c.width * c.height);
"""


def _canvas_stats(d, topic, selector=None):
    return d.execute_script(_STATS, topic, selector)


def test_viewer_in_chromium(browser, artifacts, tmp_path):
    ep = make_demo_episode(tmp_path, bag_where="robot")
    out = tmp_path / "viewer.html"
    assert main_view_episode([str(ep), "-o", str(out)]) == 0
    d = browser
    d.get(out.as_uri())
    body = d.find_element(By.TAG_NAME, "body")
    wait_for(lambda: body.get_attribute("data-ready") == "true", 10, "the page script")
    cam = d.find_element(By.CSS_SELECTOR, 'canvas[data-topic="cam/image_raw"]')
    assert cam.get_attribute("data-frame") == "0"
    # labelled lanes and a time axis in seconds
    labels = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#rows .row .label")]
    assert labels[:6] == ["agent", "planner turns", "operator", "monitor", "actions",
                          "time (s)"]
    spans = d.find_elements(By.CSS_SELECTOR, '.row[data-row="actions"] .span')
    assert {"point_at", "spin", "wait"} <= {sp.get_attribute("data-tool") for sp in spans}
    # seek to the monitor's finish decision: the spinner's frames carry overlays
    d.find_element(By.CSS_SELECTOR, '.mark[data-cat="monitor"][data-decision="finish"]').click()
    wait_for(lambda: int(body.get_attribute("data-overlays-shown") or 0) > 0, 5,
             "overlays on the frame")
    assert int(cam.get_attribute("data-frame")) > 0
    body.send_keys("o")
    wait_for(lambda: body.get_attribute("data-overlays") == "off"
             and body.get_attribute("data-overlays-shown") == "0", 5, "o to hide overlays")
    body.send_keys("o")
    wait_for(lambda: int(body.get_attribute("data-overlays-shown") or 0) > 0, 5,
             "o to show them again")
    # clicking a planner turn shows what it was sent and what it replied
    d.find_element(By.CSS_SELECTOR, 'a.turn-link[data-turn="turns/0001.json"]').click()
    detail = d.find_element(By.ID, "detail")
    wait_for(detail.is_displayed, 5, "the turn panel")
    text = detail.text
    assert "Sent" in text and "Replied" in text and "update_plan" in text
    assert 'Task from the operator: ⟦operator: "touch the red square"⟧' in text
    wait_for(lambda: d.execute_script(
        "const i = document.querySelector('#detail img'); return i && i.naturalWidth > 0;"),
        5, "the image the planner was sent")
    # playback moves the playhead and the frames
    d.find_element(By.CSS_SELECTOR, 'li.ev[data-kind="run_started"]').click()
    f0 = int(cam.get_attribute("data-frame"))
    body.send_keys(" ")
    wait_for(lambda: int(cam.get_attribute("data-frame")) > f0 + 2, 10, "playback")
    body.send_keys(" ")
    assert body.get_attribute("data-playing") == "false"
    # show the moment of the operator's takeover with the turn that followed it
    d.find_element(By.CSS_SELECTOR, 'li.ev[data-kind="operator_takeover"]').click()
    d.find_element(By.CSS_SELECTOR, 'a.turn-link[data-turn="turns/0004.json"]').click()
    d.find_element(By.CSS_SELECTOR, 'a.turn-link[data-turn="turns/0001.json"]').click()
    # seek by clicking the time axis: the turn stays open
    axis = d.find_element(By.CSS_SELECTOR, '.row[data-row="axis"] .track')
    width = axis.size["width"]
    finish_t = float(d.find_element(By.CSS_SELECTOR, 'li.ev[data-kind="monitor_decision"]')
                     .get_attribute("data-t"))
    duration = d.execute_script("return JSON.parse(document.getElementById('data')"
                                ".textContent).duration")
    ActionChains(d).move_to_element_with_offset(
        axis, int((finish_t / duration - 0.5) * width), 0).click().perform()
    wait_for(lambda: int(body.get_attribute("data-overlays-shown") or 0) > 0, 5,
             "overlays at the monitor's decision")
    assert d.find_element(By.ID, "detail").is_displayed()
    shot = artifacts / "viewer.png"
    d.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_viewer_on_a_simulated_demo_episode(browser, artifacts, tmp_path):
    """A real demo episode: the simulated table tidied by the rules planner with the vision
    monitor, recorded to a rosbag2 bag (compressed images) on the wall clock while the run used
    the simulator's clock; the viewer puts both on the simulated time axis, opens on the first
    frames, plots joints, gripper, monitor answers with the rules' thresholds and the actions,
    and draws the trackers' overlays as outlines."""
    import shutil

    from solarian_agent.rosmsg.bag import BagRecorder
    from solarian_agent.system import build_sim_system

    system = build_sim_system(seed=7, log_root=tmp_path / "controller", session="0001_demo")
    bag = tmp_path / "bag.tmp"
    rec = BagRecorder(bag)
    topics = rec.attach(system.bus, topics=[
        "overhead/image_raw", "wrist/image_raw", "agent/view", "agent/events", "agent/state",
        "monitor/verdicts", "operator/events", "joint_states"])
    assert "overhead/image_raw" in topics and "agent/events" in topics
    system.planner.message("put the red cup on the tray and the yellow paper in the bin")
    done = system.run_until(lambda: system.planner.status not in ("idle", "running", "paused"),
                            300)
    rec.close()
    assert done and system.planner.log is not None
    ep = system.planner.log.dir.parent
    system.shutdown()
    shutil.move(bag, ep / "rosbag")
    out = tmp_path / "viewer.html"
    assert main_view_episode([str(ep), "-o", str(out)]) == 0

    d = browser
    d.get(out.as_uri())
    body = d.find_element(By.TAG_NAME, "body")
    wait_for(lambda: body.get_attribute("data-ready") == "true", 10, "the page script")
    topics_shown = [c.get_attribute("data-topic") for c in d.find_elements(By.CSS_SELECTOR,
                                                                             "#videos canvas")]
    assert {"overhead/image_raw", "wrist/image_raw", "agent/view"} <= set(topics_shown)
    # it opens on the first frames, not on black panes
    for topic in ("overhead/image_raw", "wrist/image_raw"):
        assert _canvas_stats(d, topic)["mean"] > 40, topic
    # the plots: joints and gripper from the bag, the monitor's questions with the rules'
    # thresholds, the actions' spans
    rows = body.get_attribute("data-plots").split(",")
    assert {"joints", "gripper", "monitor-q", "actions", "axis"} <= set(rows)
    pick = d.find_element(By.CSS_SELECTOR,
                          '.track[data-tool="pick_object"][data-question="progress"]')
    assert pick.get_attribute("data-thresholds") == "0.8,0.8"  # the shipped pick rules
    assert int(pick.get_attribute("data-answers")) >= 3
    assert _canvas_stats(d, None, '.row[data-row="joints"] canvas')["lit"] > 0.01
    tools = {sp.get_attribute("data-tool") for sp in d.find_elements(
        By.CSS_SELECTOR, '.row[data-row="actions"] .span')}
    assert {"pick_object", "place_at", "verify_state", "home"} <= tools
    # the third monitor answer: the tracker's mask is drawn on the overhead frame then
    d.find_elements(By.CSS_SELECTOR, 'li.ev[data-kind="monitor_answer"]')[2].click()
    wait_for(lambda: int(body.get_attribute("data-overlays-shown") or 0) > 0, 5,
             "the tracker's overlay")
    # drawn as the controller draws them: outlines, the frame under them untinted
    on = _canvas_stats(d, "overhead/image_raw")
    body.send_keys("o")
    wait_for(lambda: body.get_attribute("data-overlays") == "off", 5, "o")
    off = _canvas_stats(d, "overhead/image_raw")
    body.send_keys("o")
    changed = d.execute_script(_DIFF, on["pixels"], off["pixels"])
    inside = d.execute_script(_MASK_AREA, "overhead/image_raw")
    # a 1 px outline changes far fewer pixels than the mask covers; a fill would change them all
    assert inside > 0 and 0 < changed < 0.5 * inside, (changed, inside)
    d.execute_script("arguments[0].click()", d.find_elements(By.CSS_SELECTOR,
                                                             "a.turn-link")[1])
    assert "Replied" in d.find_element(By.ID, "detail").text
    shot = artifacts / "viewer_sim.png"
    d.save_screenshot(str(shot))
    copy_to_docs(shot, "viewer.png")
