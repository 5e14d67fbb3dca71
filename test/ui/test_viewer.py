"""The episode viewer on a demo episode: every event is in the page, every planner turn is
linked and shows what was sent and replied, frames come from the rosbag with their overlays,
monitor verdicts are marked; legacy agent/ logs, bag-only and log-only episodes."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from ui_helpers import make_demo_episode

from solarian_agent.core.episode_log import read_events
from solarian_agent.ui.event_lines import describe_event
from solarian_agent.ui.viewer import find_log_dir, load_episode, main_view_episode, turn_anchor


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return make_demo_episode(tmp_path_factory.mktemp("demo"), bag_where="robot")


def page_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def event_rows(page: str) -> list[dict[str, str]]:
    rows = []
    for m in re.finditer(r'<li class="ev" ([^>]*)>(.*?)</li>', page, re.S):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        attrs["body"] = html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))
        attrs["html"] = m.group(2)
        rows.append(attrs)
    return rows


def test_viewer_has_every_event_and_links_every_turn(demo, tmp_path, capsys):
    out = tmp_path / "viewer.html"
    assert main_view_episode([str(demo), "-o", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    page = out.read_text()
    logs = demo / "logs"
    events = read_events(logs / "events.jsonl")
    rows = event_rows(page)
    # every logged event is in the page, with its line, in time order
    log_rows = [r for r in rows if "bag</span>" not in r["html"]]
    assert len(log_rows) == len(events)
    for ev, row in zip(events, log_rows, strict=True):
        assert row["data-kind"] == ev["kind"]
        rest = {k: v for k, v in ev.items() if k not in ("t", "kind")}
        assert describe_event(ev["kind"], rest) in row["body"]
    kinds = {r["data-kind"] for r in rows}
    assert {"run_started", "planner_turn", "plan_changed", "action_started", "monitor_answer",
            "monitor_decision", "operator_takeover", "run_paused", "run_resumed",
            "run_ended"} <= kinds
    # the operator's own events come from the bag too, beside the agent's
    assert any(r["data-kind"] == "operator_event" and r["data-cat"] == "operator" for r in rows)
    assert [r for r in rows if r["data-kind"] == "operator_takeover"][0]["data-cat"] == \
        "operator"
    # every turn file has a section, linked from its planner_turn event
    turn_files = sorted(p.name for p in (logs / "turns").glob("*.json"))
    assert len(turn_files) == 4
    turn_rows = [r for r in rows if r["data-kind"] == "planner_turn"]
    assert len(turn_rows) == len(turn_files)
    for name, row in zip(turn_files, turn_rows, strict=True):
        rel = f"turns/{name}"
        anchor = turn_anchor(rel)
        assert f'href="#{anchor}"' in row["html"] and f'data-turn="{rel}"' in row["html"]
        sec = re.search(rf'<section class="turn" id="{anchor}"[^>]*>(.*?)</section>', page, re.S)
        assert sec, rel
        body = html.unescape(sec.group(1))
        turn = json.loads((logs / "turns" / name).read_text())
        assert "Sent" in body and "Replied" in body
        assert turn["input"]["system"].splitlines()[0] in body
        for call in turn["output"]["tool_calls"]:
            assert call["name"] in body
        if turn["output"]["text"]:
            assert turn["output"]["text"] in body
    first = html.unescape(re.search(r'id="turn-0001"[^>]*>(.*?)</section>', page, re.S)[1])
    assert 'Task from the operator: ⟦operator: "touch the red square"⟧' in first
    assert "update_plan" in first
    data = page_data(page)
    # the images the turns name are embedded
    img_refs = set(re.findall(r'data-src="(images/[^"]+)"', page))
    assert img_refs and img_refs <= set(data["images"])
    assert all(v.startswith("data:image/") for v in data["images"].values())
    # the video: frames from the robot's bag, with overlays on the frames they were logged for
    cams = {c["topic"]: c for c in data["cameras"]}
    assert set(cams) == {"cam/image_raw", "agent/view"}
    frames = cams["cam/image_raw"]["frames"]
    assert len(frames) >= 10 and frames == sorted(frames)
    with_ovl = [f for f in frames if f[2]]
    assert with_ovl
    shapes = [s for f in with_ovl for i in f[2] for s in data["overlays"][i]["shapes"]]
    assert any(s["field"] == "target" and s["polys"] and s.get("box") for s in shapes)
    assert any(s["field"] == "grip" and s.get("point") for s in shapes)
    # frames and events share one timeline
    t_ev = [e["t"] for e in data["events"] if e["t"] is not None]
    assert min(t_ev) >= 0.0 and max(t_ev) <= data["duration"] + 1e-6
    spin_ovl = [f[0] for f in with_ovl]
    monitor = [e["t"] for e in data["events"] if e["kind"] == "monitor_answer"]
    assert min(spin_ovl) - 0.5 <= min(monitor) <= max(spin_ovl) + 0.5
    # monitor verdicts are marked with their decision
    assert any(e["cat"] == "monitor" and e["decision"] == "finish" for e in data["events"])
    # the embedded data cannot end its script element early, whatever the log holds
    blob = re.search(r'id="data">(.*?)</script>', page, re.S)[1]
    assert "<" not in blob


def test_default_output_goes_beside_the_log(demo):
    assert main_view_episode([str(demo / "logs")]) == 0
    assert (demo / "viewer.html").is_file()


def test_bag_inside_the_episode_and_a_bag_only_episode(tmp_path):
    ep = make_demo_episode(tmp_path / "a", bag_where="episode")
    loaded = load_episode(ep)
    assert loaded.frames_from == "bag" and loaded.bags == [ep / "rosbag"]
    # no log at all (a run only the robot recorded): the agent's events come from the bag
    shutil.rmtree(ep / "logs")
    loaded = load_episode(ep)
    assert loaded.log_dir is None and loaded.frames
    kinds = [e["kind"] for e in loaded.events]
    assert "run_started" in kinds and "planner_turn" in kinds and "operator_event" in kinds
    assert all(e["_src"] == "bag" for e in loaded.events)
    assert main_view_episode([str(ep), "-o", str(tmp_path / "v.html")]) == 0


def test_legacy_agent_dir_without_a_bag(tmp_path):
    ep = make_demo_episode(tmp_path / "b", bag_where="none")
    legacy = tmp_path / "legacy" / "episodes" / "000001"
    legacy.mkdir(parents=True)
    shutil.copytree(ep / "logs", legacy / "agent")
    assert find_log_dir(legacy) == (legacy, legacy / "agent")
    # a kill mid-write leaves a torn last line: still viewable
    with open(legacy / "agent" / "events.jsonl", "a") as f:
        f.write('{"t": "2026-09-21T14:13:30Z", "kind": "tor')
    loaded = load_episode(legacy)
    assert loaded.frames_from == "log images" and loaded.frames
    out = tmp_path / "legacy.html"
    assert main_view_episode([str(legacy), "-o", str(out)]) == 0
    page = out.read_text()
    assert len(event_rows(page)) == len(read_events(legacy / "agent" / "events.jsonl"))
    assert 'href="#turn-0004"' in page


def test_bad_arguments(tmp_path, capsys):
    assert main_view_episode([str(tmp_path / "nope")]) == 2
    assert "no events.jsonl" in capsys.readouterr().err
    assert main_view_episode([str(tmp_path), "--fps", "0"]) == 2


def test_plots_come_from_the_log_and_the_bag(demo, tmp_path):
    from solarian_agent.ui.episode_plots import rule_text

    out = tmp_path / "viewer.html"
    assert main_view_episode([str(demo), "-o", str(out)]) == 0
    data = page_data(out.read_text())
    plots = data["plots"]
    # the episode's own clock anchors the bag's stamps: frames, joints and events on one axis
    ep = load_episode(demo)
    assert ep.simulated and ep.anchor is not None
    assert plots["t"] and plots["joints"] and len(plots["t"]) == len(plots["joints"][0]["values"])
    assert plots["t"][0] >= 0 and plots["t"][-1] <= data["duration"] + 1e-6
    # every action's span, with its outcome, in order
    spans = {s["tool"]: s for s in plots["actions"]}
    assert {"point_at", "spin", "wait"} <= set(spans)
    assert spans["spin"]["outcome"] == "succeeded"  # finished by the monitor's decision
    assert spans["point_at"]["start"] < spans["spin"]["start"] < spans["spin"]["end"]
    finish = next(e["t"] for e in data["events"] if e["kind"] == "monitor_decision")
    assert spans["spin"]["start"] < finish <= spans["spin"]["end"] + 0.5
    # each monitor question with its answers; the toy's questions are not in its catalogue
    questions = {(q["tool"], q["question"]): q for q in plots["monitor"]}
    done = questions[("spin", "is the spin done?")]
    assert [a["p"] for a in done["answers"]] == [0.97]
    assert done["answers"][0]["decision"] == "finish" and done["defined"] is False
    assert rule_text({"do": "escalate", "value": "failed", "threshold": 0.8, "consecutive": 2,
                      "after_s": 6}) == "escalate on failed p >= 0.8 x2 in a row after 6 s"


def test_monitor_rules_come_from_episode_started(tmp_path):
    from solarian_agent.ui.episode_data import Episode
    from solarian_agent.ui.episode_plots import monitor_plots

    ep = Episode(tmp_path, None)
    ep.events = [
        {"kind": "episode_started", "_ts": 10.0, "monitor_questions": {"pick": [
            {"name": "progress", "type": "choice", "choices": {"approaching": "", "failed": ""},
             "when": [{"do": "escalate", "value": "failed", "threshold": 0.8}]}],
            "place": [{"name": "released", "type": "predicate",
                       "when": {"do": "finish", "threshold": 0.7}}]}},
        {"kind": "monitor_answer", "_ts": 11.0, "tool": "pick", "question": "progress",
         "value": "approaching", "probability": 0.6, "decision": ""},
        {"kind": "monitor_answer", "_ts": 12.5, "tool": "place", "question": "released",
         "value": "true", "probability": 0.9, "decision": "finish"},
    ]
    pick, place = monitor_plots(ep, 10.0)
    assert pick["values"] == ["approaching", "failed"] and pick["answers"][0]["t"] == 1.0
    assert [(r["do"], r["value"], r["threshold"]) for r in pick["rules"]] == [
        ("escalate", "failed", 0.8)]
    assert place["rules"][0]["value"] == "true" and place["rules"][0]["threshold"] == 0.7
    assert place["rules"][0]["text"] == "finish on true p >= 0.7"
    assert place["answers"] == [{"t": 2.5, "value": "true", "p": 0.9, "decision": "finish",
                                 "action": ""}]


def test_a_tracker_that_did_not_stop_reads_so_not_as_stopped() -> None:
    text = describe_event("service_stop_failed", {"by": "agent", "field": "cam.target",
                                                   "error": "OSError: tracker process gone"})
    assert text == "cam.target did not stop (OSError: tracker process gone): it may still run"
    assert describe_event("service_stopped", {"module": "tracker", "field": "cam.target"}) == \
        "tracker cam.target stopped"
