"""Regression tests for review fixes: a bad skill event or one failing action does not stop the
monitor's other work; a rejected look changes no view state."""

from monitor_helpers import PROGRESS, Rig, choice

from solarian_agent.core.messages import AgentEvent

Q = [{**PROGRESS, "when": [{"do": "finish", "value": "holding", "threshold": 0.8}]}]


def test_a_malformed_skill_event_does_not_drop_the_events_queued_with_it():
    rig = Rig(Q)
    rig.backend.default = {"progress": choice("approaching", 0.9)}
    rig._events.publish(AgentEvent(rig.clock.wall(), "skill_started", {
        "by": "agent", "skill": "grip", "action_id": "bad", "generation": "x"}))
    rig.start("a2")
    rig.tick()
    assert list(rig.engine.actions) == ["a2"]
    assert rig.events("monitor_error")
    rig.end("a2")
    rig.tick()
    assert rig.engine.actions == {}


def test_one_failing_action_does_not_stop_the_others_ticks():
    calls = {"n": 0}

    def readings(js):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("readings broke once")
        return {}

    rig = Rig(Q, readings=readings)
    rig.backend.default = {"progress": choice("approaching", 0.9)}
    rig.start("a1")
    rig.start("a2")
    rig.tick()  # both keep their first frame
    rig.tick()  # a1's call fails while it is built; a2 is still asked
    assert [r.action_id for r in rig.backend.requests] == ["a2"]
    assert any("readings broke once" in e["error"] for e in rig.events("monitor_error"))
    rig.tick()
    assert [r.action_id for r in rig.backend.requests][-2:] == ["a1", "a2"]


def _views(frames):
    from solarian_agent.core.clock import FakeClock
    from solarian_agent.core.observations import ObservationStore
    from solarian_agent.core.views import ViewManager

    clock = FakeClock()
    store = ObservationStore(clock, 320, 30.0, grid=False)
    return ViewManager(clock, store, frames, ["wrist"], reads_images=True)


def test_a_rejected_look_does_not_change_keep():
    import pytest

    from solarian_agent.core.errors import ToolCallRejected

    vm = _views(lambda cam: None)  # no frame yet
    with pytest.raises(ToolCallRejected):
        vm.prepare("look", {"keep": 3})
    assert vm.keep == 0
    vm.pins = {f"p{i}": [] for i in range(8)}
    with pytest.raises(ToolCallRejected):
        vm.prepare("look", {"keep": 2, "pin": "one more"})
    assert vm.keep == 0


def test_a_pin_name_is_trimmed_everywhere():
    from monitor_helpers import pattern

    from solarian_agent.core.messages import Image

    vm = _views(lambda cam: Image(pattern(48, 64), 0.0, cam, 1))
    for i in range(8):
        vm.prepare("look", {"pin": f"p{i}"})
    vm.prepare("look", {"pin": " p3 "})  # replaces p3: no ninth pin, no refusal
    assert sorted(vm.pins) == [f"p{i}" for i in range(8)]
    vm.prepare("unpin", {"name": " p3 "})
    assert "p3" not in vm.pins


def test_a_failed_interpretation_does_not_keep_the_frame_alive_in_the_error():
    import gc
    import weakref

    import numpy as np
    import pytest

    from solarian_agent.core.clock import FakeClock
    from solarian_agent.core.model_api import ModelError
    from solarian_agent.perception.observe_scene import (
        CameraFrame,
        ObserveSceneRejected,
        SceneObserver,
    )

    clock = FakeClock()
    refs = []

    def capture():
        px = np.zeros((48, 64, 3), np.uint8)
        refs.append(weakref.ref(px))
        return CameraFrame(b"\xff\xd8" + b"\x01" * 500, "image/jpeg", 64, 48, "wrist",
                           clock.now(), px)

    class Failing:
        name, model = "fake", "fake-vision"

        def describe(self, frame, focus, *, timeout_s):
            raise ModelError("timeout", "no answer")

    obs = SceneObserver(clock, Failing(), capture, camera="wrist", camera_running=lambda: True)
    with pytest.raises(ObserveSceneRejected) as info:
        obs.observe_scene("cup")
    err = info.value  # the caller keeps the error (a tool result, a log record)
    assert err.code == "interpretation_failed" and "timeout" in err.reason
    del info
    gc.collect()
    assert refs[0]() is None
