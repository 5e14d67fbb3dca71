"""observe_scene(focus), one observation: one frame captured and handed to the backend as
captured (with its timeout), the times it is stamped with, the 4 MiB limit, no retries, the
bounded description, the event it publishes, and no image kept after it (nor in an error)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest
from observe_scene_helpers import Anonymous, Backend, Camera, SizingBackend, code, make

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.model_api import ModelError
from solarian_agent.perception.observe_scene import (
    MAX_DESCRIPTION_CHARS,
    MAX_FRAME_BYTES,
    TRUNCATION_MARK,
    CameraFrame,
    ObserveSceneRejected,
    SceneObserver,
    bound_description,
)
from solarian_agent.perception.vision import Description


def test_one_frame_is_captured_and_passed_to_the_backend():
    obs, cam, be, _, _ = make(size=1234)
    res = obs.observe_scene("the cup")
    assert cam.captures == 1 and be.calls == 1 and be.sizes == [1234]
    assert res.model_generated and res.camera == "wrist" and res.frame_bytes == 1234
    assert "model-generated" in res.text()


def test_the_backend_gets_the_frame_as_captured_and_the_result_says_where_from():
    seen = []

    class Seeing(Backend):
        def describe(self, frame, focus, *, timeout_s):
            seen.append((frame.media_type, frame.width, frame.height, frame.camera,
                         frame.pixels.shape, focus, timeout_s))
            return Description("a cup", model="")  # no model named: the backend's

    clock = FakeClock()
    cam = Camera(clock)
    obs = SceneObserver(clock, Seeing(), cam.capture, camera="wrist",
                        camera_running=lambda: True, app_running=lambda: True)
    assert obs.calls == 0
    res = obs.observe_scene("cup")
    res2 = obs.observe_scene("tray")
    assert obs.calls == 2
    assert seen[0] == ("image/jpeg", 640, 480, "wrist", (4, 4, 3), "cup", 30.0)
    assert (res.backend, res.model, res.camera, res.frame_bytes) == (
        "fake", "fake-vision", "wrist", 1000)
    assert res.observed_at_wall == clock.wall() and res.captured_at == clock.now() - 0.05
    assert 0 <= res.latency_s < 5 and res2.focus == "tray"


def test_the_backend_gets_a_30_second_timeout_by_default() -> None:
    clock, be = FakeClock(), SizingBackend()
    obs = SceneObserver(clock, be, Camera(clock).capture, camera="wrist",
                        camera_running=lambda: True)
    assert obs.timeout_s == 30.0
    obs.observe_scene("cup")
    assert be.timeouts == [30.0]


def test_a_backend_without_name_or_model_and_a_frame_without_camera() -> None:
    clock = FakeClock()
    px = np.zeros((4, 4, 3), np.uint8)
    obs = SceneObserver(clock, Anonymous(),
                        lambda: CameraFrame(b"\0" * 10, "image/png", 4, 4, "", 1.0, px),
                        camera="wrist", camera_running=lambda: True)
    res = obs.observe_scene("cup")
    assert (res.backend, res.model, res.camera) == ("", "", "wrist")


def test_observed_at_is_sampled_after_capture_before_interpretation():
    obs, cam, be, clock, _ = make(advance=7.0)
    t0 = clock.now()
    res = obs.observe_scene("the cup")
    assert res.observed_at == t0  # not t0 + 7 s of model latency
    assert clock.now() == t0 + 7.0
    assert res.captured_at == pytest.approx(t0 - 0.05)


def test_a_frame_over_4_mib_is_rejected_before_any_request():
    obs, cam, be, _, events = make(size=MAX_FRAME_BYTES + 1)
    assert code(lambda: obs.observe_scene("cup")) == "frame_too_large"
    assert cam.captures == 1 and be.calls == 0
    assert events[-1][0] == "observe_scene_rejected"
    obs2, _, be2, _, _ = make(size=MAX_FRAME_BYTES)
    obs2.observe_scene("cup")
    assert be2.calls == 1


def test_neither_capture_nor_interpretation_is_retried():
    obs, cam, be, _, _ = make()
    cam.error = OSError("usb gone")
    assert code(lambda: obs.observe_scene("cup")) == "capture_failed"
    assert cam.captures == 1 and be.calls == 0
    obs, cam, be, _, _ = make(error=ModelError("timeout", "slow"))
    assert code(lambda: obs.observe_scene("cup")) == "interpretation_failed"
    assert cam.captures == 1 and be.calls == 1


def test_description_is_bounded_with_an_explicit_flag():
    obs, *_ = make(text="z" * 5000)
    res = obs.observe_scene("cup")
    assert len(res.description) == MAX_DESCRIPTION_CHARS and res.truncated
    assert res.description.endswith("[truncated]")
    obs, *_ = make(text="z" * MAX_DESCRIPTION_CHARS)
    res = obs.observe_scene("cup")
    assert len(res.description) == MAX_DESCRIPTION_CHARS and not res.truncated


def test_description_bound_at_exactly_one_over() -> None:
    """2,000 characters pass whole; 2,001 are cut to at most 2,000 with the mark: where the
    budget ends (mid-word too), trailing blanks dropped."""
    assert MAX_DESCRIPTION_CHARS == 2000
    text = "a cup " * 333 + "zzz"  # 2,001 characters
    assert len(text) == 2001
    obs, *_ = make(text=text)
    res = obs.observe_scene("cup")
    assert res.truncated and len(res.description) <= MAX_DESCRIPTION_CHARS
    assert res.description == "a cup " * 331 + "a" + TRUNCATION_MARK  # the blank dropped
    assert bound_description("q" * 2001) == ("q" * 1988 + TRUNCATION_MARK, True)
    assert len(bound_description("q" * 2001)[0]) == MAX_DESCRIPTION_CHARS
    # the model's blank edges are no part of the description and count for nothing
    assert bound_description("  " + "q" * 2000 + "\n") == ("q" * 2000, False)


def test_the_observe_scene_event_carries_sizes_and_timings_exactly() -> None:
    obs, cam, be, clock, events = make(text="a cup")
    res = obs.observe_scene(" the cup ")
    assert events == [("observe_scene", {
        "focus": "the cup", "camera": "wrist", "frame_bytes": 1000,
        "observed_at": clock.wall(), "latency_s": round(res.latency_s, 4),
        "truncated": False, "chars": 5, "model": "fake-vision",
        "usage": Description("").usage.as_dict()})]
    assert (res.backend, res.model, res.frame_bytes) == ("fake", "fake-vision", 1000)


def test_the_event_s_latency_is_rounded_to_four_decimals(monkeypatch: Any) -> None:
    import solarian_agent.perception.observe_scene as mod

    ticks = iter([100.0, 101.23456789])

    class FakeTime:
        @staticmethod
        def monotonic() -> float:
            return next(ticks)

    monkeypatch.setattr(mod, "time", FakeTime)
    obs, _, _, _, events = make()
    res = obs.observe_scene("cup")
    assert res.latency_s == pytest.approx(1.23456789)
    assert events[-1][0] == "observe_scene"
    latency = events[-1][1]["latency_s"]
    assert latency == 1.2346 and isinstance(latency, float)


def test_image_bytes_are_not_kept_logged_or_returned():
    clock = FakeClock()
    refs = []

    def capture():
        px = np.zeros((480, 640, 3), np.uint8)
        refs.append(weakref.ref(px))
        return CameraFrame(b"\xff\xd8" + b"\x01" * 5000, "image/jpeg", 640, 480, "wrist",
                           clock.now(), px)

    events = []
    obs = SceneObserver(clock, Backend(), capture, camera="wrist", camera_running=lambda: True,
                        on_event=lambda k, d: events.append((k, d)))
    res = obs.observe_scene("cup")
    gc.collect()
    assert refs[0]() is None  # nothing holds the frame after the call
    assert not any(isinstance(v, (bytes, bytearray, np.ndarray))
                   for v in vars(res).values())
    assert not any(isinstance(v, (bytes, bytearray, np.ndarray))
                   for _, d in events for v in d.values())
    assert not any(isinstance(v, (bytes, np.ndarray)) for v in vars(obs).values())
    assert events[-1][0] == "observe_scene" and events[-1][1]["frame_bytes"] == 5002


def test_a_failed_interpretation_does_not_keep_the_frame_alive_in_the_error():
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
