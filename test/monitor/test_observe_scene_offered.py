"""When observe_scene is offered (the application, the camera and a vision backend all there),
what inspect_self reports without capturing, and each refusal: said exactly, published
with its code and reason."""

from __future__ import annotations

import pytest
from observe_scene_helpers import Anonymous, SizingBackend, code, make, observer, reason

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.model_api import ModelError
from solarian_agent.perception.observe_scene import (
    MAX_FRAME_BYTES,
    AttentionEpisode,
    ObserveSceneRejected,
    SceneObserver,
)


def test_offered_only_while_app_camera_and_backend_are_there():
    obs, cam, be, _, _ = make()
    assert obs.offered() and [d.name for d in obs.tool_defs()] == ["observe_scene"]
    cam.running = False
    assert not obs.offered() and obs.tool_defs() == []
    assert code(lambda: obs.observe_scene("cup")) == "camera_not_running"
    assert cam.captures == 0
    obs, cam, _, _, _ = make(backend=None)
    assert not obs.offered()
    assert code(lambda: obs.observe_scene("cup")) == "no_vision"
    obs, cam, _, _, _ = make(app=False)
    assert not obs.offered()
    assert code(lambda: obs.observe_scene("cup")) == "not_running"
    assert cam.captures == 0


def test_a_failing_app_check_counts_as_not_running() -> None:
    def broken() -> bool:
        raise RuntimeError("gone")

    obs = observer(SizingBackend(), app=broken)
    with pytest.raises(ObserveSceneRejected) as e:
        obs.observe_scene("cup")
    assert (e.value.code, e.value.reason) == ("not_running", "the application is not running")


def test_each_refusal_says_exactly_why():
    obs, *_ = make(backend=None)
    assert reason(lambda: obs.observe_scene("cup")) == (
        "no_vision", "no vision backend is configured (runtime.vision is none)")
    obs, *_ = make(app=False)
    assert reason(lambda: obs.observe_scene("cup")) == (
        "not_running", "the application is not running")
    obs, *_ = make(running=False)
    assert reason(lambda: obs.observe_scene("cup")) == (
        "camera_not_running", "the configured camera 'wrist' is not running")
    obs, cam, *_ = make()
    cam.error = OSError("usb gone")
    assert reason(lambda: obs.observe_scene("cup")) == (
        "capture_failed", "capture failed: OSError: usb gone")
    obs, cam, *_ = make()
    obs._capture = lambda: None
    assert reason(lambda: obs.observe_scene("cup")) == (
        "no_frame", "camera 'wrist' has no current frame")
    obs, *_ = make(size=MAX_FRAME_BYTES + 1)
    assert reason(lambda: obs.observe_scene("cup")) == (
        "frame_too_large", f"the frame is {MAX_FRAME_BYTES + 1} bytes; at most "
        f"{MAX_FRAME_BYTES} (4 MiB) are sent, so nothing was sent")
    obs, *_ = make(error=ModelError("timeout", "slow"))
    assert reason(lambda: obs.observe_scene("cup")) == (
        "interpretation_failed", "the vision model failed (timeout): slow")
    obs, *_ = make(error=ValueError("bad json"))
    assert reason(lambda: obs.observe_scene("cup")) == (
        "interpretation_failed", "the vision backend failed: ValueError: bad json")


def test_every_refusal_is_published_with_its_code_and_reason() -> None:
    obs, cam, be, clock, events = make(backend=None)
    with pytest.raises(ObserveSceneRejected):
        obs.observe_scene("cup")
    assert events == [("observe_scene_rejected", {
        "code": "no_vision", "reason": "no vision backend is configured (runtime.vision is "
                                       "none)"})]
    obs, cam, be, clock, events = make()
    ep = AttentionEpisode()
    obs.observe_scene("cup", ep)
    with pytest.raises(ObserveSceneRejected) as e:
        obs.observe_scene("cup", ep)
    assert (e.value.code, e.value.reason) == (
        "repeated", "this episode already observed with the same focus; ask for different "
                    "information")
    assert events[-1] == ("observe_scene_rejected", {"code": "repeated",
                                                     "reason": e.value.reason})
    ep = AttentionEpisode()
    with pytest.raises(ObserveSceneRejected):
        obs.observe_scene(5, ep)  # type: ignore[arg-type]
    assert ep.attempts == [("observe_scene", "", False)]


def test_inspect_self_reports_the_facts_separately_and_never_captures():
    obs, cam, _, _, _ = make()
    cam.running = False
    facts = obs.inspect_self()
    assert cam.captures == 0
    assert facts["camera"] == {"name": "wrist", "configured": True, "running": False}
    assert facts["vision"]["configured"] and facts["vision"]["model"] == "fake-vision"
    assert facts["app_running"] and not facts["observe_scene_offered"]


def test_inspect_self_reports_every_fact() -> None:
    ep = AttentionEpisode()
    assert observer(SizingBackend()).inspect_self(ep) == {
        "app_running": True,
        "camera": {"name": "wrist", "configured": True, "running": True},
        "vision": {"configured": True, "backend": "fake", "model": "fake-vision"},
        "observe_scene_offered": True}
    assert ep.attempts == [("inspect_self", "", True)]

    def broken() -> bool:
        raise OSError("no display")

    assert observer(None, app=broken).inspect_self() == {
        "app_running": False,
        "camera": {"name": "wrist", "configured": True, "running": True},
        "vision": {"configured": False, "backend": "none", "model": ""},
        "observe_scene_offered": False}
    anon = observer(Anonymous(), cam=lambda: False).inspect_self()
    assert anon["vision"] == {"configured": True, "backend": "none", "model": ""}
    assert anon["camera"]["running"] is False and anon["observe_scene_offered"] is False
    unnamed = SceneObserver(FakeClock(), SizingBackend(), lambda: None, camera="",
                            camera_running=lambda: True).inspect_self()
    assert unnamed["camera"] == {"name": "", "configured": False, "running": True}


class _Falsy(SizingBackend):
    """A backend object that is falsy (``__bool__`` False) yet configured."""

    def __bool__(self) -> bool:
        return False


def test_inspect_self_names_any_configured_backend_even_a_falsy_one() -> None:
    # a backend object that is falsy (e.g. one with __len__) is still configured: its name
    # and model are reported, never the "none" of no backend
    facts = observer(_Falsy()).inspect_self()
    assert facts["vision"] == {"configured": True, "backend": "fake", "model": "fake-vision"}
    assert facts["observe_scene_offered"] is True
