"""Views, observe_scene and monitor notes as the planner uses them."""

import re

from solarian_agent.core import names
from solarian_agent.core.messages import MonitorVerdict
from solarian_agent.core.model_api import ImagePart, ModelRequest
from solarian_agent.models.scripted import ScriptedProvider, reply
from solarian_agent.perception.vision import ModelVisionBackend
from solarian_agent.testing.harness import PointAt, make_harness


def last_user(req: ModelRequest):
    return [m for m in req.messages if m.role == "user"][-1]


def last_tool(req: ModelRequest):
    return [m for m in req.messages if m.role == "tool"][-1]


def images(msg) -> list[ImagePart]:
    return [p for p in msg.content if isinstance(p, ImagePart)]


def test_look_at_a_region_and_point_in_it_maps_to_capture_pixels():
    PointAt.seen_points.clear()
    seen = {}

    def point(req):
        img = images(last_tool(req))[0]
        seen["size"] = (img.width, img.height)
        return reply("", ("point_at", {"point": [10, 20], "observation_id": img.observation_id}))

    h = make_harness([reply("", ("look", {"camera": "cam", "region": [0.5, 0.5, 1.0, 1.0]})),
                      point, reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("touch the thing in the lower right")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert seen["size"] == (320, 240)  # the region at capture resolution
    (x, y), = PointAt.seen_points
    assert (x, y) == (330.0, 260.0)


def test_unwatch_stops_images_coming_with_every_turn():
    h = make_harness([reply("", ("unwatch", {}), ("wait", {"seconds": 0.1})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))])
    h.say("wait")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert images(last_user(h.provider.calls[0].request))  # watched by default
    assert not images(last_user(h.provider.calls[1].request))


def test_text_only_planner_gets_descriptions_from_the_vision_model():
    vision = ScriptedProvider([reply("a grey table with a red square at the lower right")])
    h = make_harness([reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     reads_images=False, vision_backend=ModelVisionBackend(vision))
    h.say("what do you see")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    wake = last_user(h.provider.calls[0].request)
    assert not images(wake)
    assert "red square at the lower right" in wake.text()
    assert vision.calls[0].request.purpose == "vision"


def test_observe_scene_offered_only_with_a_vision_backend_and_bounded():
    plain = make_harness([reply("", ("finish_task", {"summary": "x", "success": True}))])
    plain.say("hi")
    assert plain.run_until(lambda: plain.planner.status == "succeeded", 5)
    assert "observe_scene" not in {t.name for t in plain.provider.calls[0].request.tools}

    vision = ScriptedProvider([reply("x" * 2500)])
    h = make_harness([reply("", ("observe_scene", {"focus": "  the red square  "})),
                      reply("", ("observe_scene", {"focus": "a", "camera": "cam"})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     config={"runtime": {"vision": "cv", "vision_camera": "cam"}},
                     vision_backend=ModelVisionBackend(vision))
    h.say("look closely")
    assert h.run_until(lambda: h.planner.status == "succeeded", 10)
    assert "observe_scene" in {t.name for t in h.provider.calls[0].request.tools}
    first = last_tool(h.provider.calls[1].request).text()
    from solarian_agent.perception.observe_scene import MAX_DESCRIPTION_CHARS, TRUNCATION_MARK
    n_x = max(len(r) for r in re.findall("x+", first))
    assert "truncated" in first.lower()
    assert n_x == MAX_DESCRIPTION_CHARS - len(TRUNCATION_MARK)  # bounded to 2,000 characters
    second = last_tool(h.provider.calls[2].request).text()
    assert second.startswith("refused") and "only focus" in second
    assert len(vision.calls) == 1  # the refused call never reached the model


def test_monitor_answers_without_rules_are_shown_to_the_planner():
    h = make_harness([reply("", ("wait", {"seconds": 5})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     config={"planner_heartbeat_s": 1.0})
    pub = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    aid = next(iter(h.planner.actions))
    pub.publish(MonitorVerdict(aid, "wait", "released", "true", 0.93))
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    wake = last_user(h.provider.calls[1].request).text()
    assert (f'Monitor (may be wrong; check the newest image): {aid} wait: released='
            '⟦monitor: "true"⟧' in wake)


def test_monitor_notes_for_untracked_actions_are_dropped():
    h = make_harness([reply("", ("wait", {"seconds": 5})),
                      reply("", ("finish_task", {"summary": "ok", "success": True}))],
                     config={"planner_heartbeat_s": 1.0})
    pub = h.bus.publisher(names.MONITOR_VERDICTS, names.T_MONITOR_VERDICT)
    h.say("wait")
    assert h.run_until(lambda: h.planner.actions, 5)
    for i in range(50):  # verdicts about actions this planner never started
        pub.publish(MonitorVerdict(f"op{i}", "teleop", "held", "false", 0.9))
    assert h.run_until(lambda: len(h.provider.calls) == 2, 5)
    assert len(h.planner.book.notes) == 0
    assert "op1 " not in last_user(h.provider.calls[1].request).text()


def test_observe_scene_slots_follow_call_order_around_an_effect():
    """An attention episode allows acquisitions before its first effect, none after it, whatever
    thread the interpretation runs on; a third acquisition is refused."""
    from solarian_agent.core.planner import ThreadCaller

    vision = ScriptedProvider([reply("a red square"), reply("a grey table")])
    h = make_harness([
        reply("", ("observe_scene", {"focus": "the red square"}),
              ("wait", {"seconds": 0.1}),
              ("observe_scene", {"focus": "the table"})),
        reply("", ("finish_task", {"summary": "ok", "success": True})),
    ], config={"runtime": {"vision": "cv", "vision_camera": "cam"}},
        vision_backend=ModelVisionBackend(vision), caller=ThreadCaller())
    h.say("look, then wait")
    import time
    deadline = time.monotonic() + 10
    while h.planner.status != "succeeded" and time.monotonic() < deadline:
        h.runtime.step()
    assert h.planner.status == "succeeded"
    results = [m.text() for m in h.provider.calls[1].request.messages if m.role == "tool"]
    assert "a red square" in results[-3]
    assert results[-1].startswith("refused") and "after the episode's first effect" in \
        results[-1]
    assert len(vision.calls) == 1


def test_observe_scene_service_for_front_ends():
    vision = ScriptedProvider([reply("a red square on a grey table")])
    h = make_harness([], config={"runtime": {"vision": "cv", "vision_camera": "cam"}},
                     vision_backend=ModelVisionBackend(vision))
    r = h.bus.call(names.OBSERVE_SCENE, {"focus": "  the red square "})
    assert r["ok"] and r["focus"] == "the red square"
    assert r["description"] == "a red square on a grey table" and r["truncated"] is False
    assert r["observed_at"] <= h.clock.now()
    bad = h.bus.call(names.OBSERVE_SCENE, {"focus": "\x07"})
    assert not bad["ok"] and "control characters" in bad["error"]
    assert len(vision.calls) == 1  # the refused request never reached the model
