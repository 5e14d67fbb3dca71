"""The observer on the bus: the bus camera's frames and their freshness, and planner_vision
wiring the observer on the vision camera with the configured backend, on the given clock."""

from __future__ import annotations

from typing import Any

import numpy as np
from observe_scene_helpers import SizingBackend, cfg

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import Image
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.models.wiring import planner_vision
from solarian_agent.perception.observe_scene import BusCamera


def test_bus_camera_runs_while_frames_are_fresh():
    clock, bus = FakeClock(), Bus()
    cam = BusCamera(bus, "wrist", clock, stale_s=1.0)
    assert not cam.running() and cam.capture() is None
    pub = bus.publisher(names.image_topic("wrist"), names.T_IMAGE)
    pub.publish(Image(np.zeros((48, 64, 3), np.uint8), clock.now(), "wrist", 1))
    frame = cam.capture()
    assert cam.running() and frame.media_type == "image/png" and frame.width == 64
    clock.advance(2.0)
    assert not cam.running()


def test_the_bus_camera_s_frame_and_freshness() -> None:
    clock, bus = FakeClock(), Bus()
    cam = BusCamera(bus, "wrist", clock)
    ep = next(e for e in bus.endpoints if e.name == names.image_topic("wrist"))
    assert (ep.kind, ep.type, ep.qos, ep.node) == ("subscription", names.T_IMAGE,
                                                   QoS(depth=1), "observe_scene")
    px = np.full((48, 64, 3), 7, np.uint8)
    stamp = clock.now()
    bus.publisher(names.image_topic("wrist"), names.T_IMAGE).publish(
        Image(px, stamp, "wrist", 1))
    clock.advance(2.0)  # the default limit: still fresh at exactly 2 s
    assert cam.running()
    f = cam.capture()
    assert f is not None
    assert (f.media_type, f.width, f.height, f.camera, f.captured_at) == (
        "image/png", 64, 48, "wrist", stamp)
    assert f.pixels is px and f.data.startswith(b"\x89PNG")
    clock.advance(0.001)
    assert not cam.running() and cam.capture() is None
    bus.publisher(names.image_topic("wrist"), names.T_IMAGE).publish("not an image")
    assert not cam.running() and cam.capture() is None


def test_planner_vision_wires_the_observer_on_the_vision_camera() -> None:
    bus, clock = Bus(), FakeClock()
    assert planner_vision(bus, clock, cfg()) == (None, None)
    be = SizingBackend()
    backend, obs = planner_vision(bus, clock, cfg(cameras=["wrist", "top"]), vision="cv",
                                  backend=be)
    assert backend is be and obs is not None and obs.camera == "wrist" and obs.backend is be
    backend, obs = planner_vision(bus, clock, cfg(runtime={"vision_camera": "top"}),
                                  vision="cv")
    assert backend is not None and backend.name == "cv"
    assert obs is not None and obs.camera == "top" and not obs.offered()  # no frame yet
    # a backend handed in without a vision configured: no camera, so no observer
    backend, obs = planner_vision(bus, clock, cfg(), backend=be)
    assert backend is be and obs is None


def test_planner_vision_builds_the_backend_from_the_configuration(monkeypatch: Any) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-0123456789")
    c = cfg(cameras=["wrist"], planner={"provider": "anthropic", "model": "pm",
                                        "base_url": "http://h:2/v1"},
            runtime={"vision": "anthropic"})
    backend, obs = planner_vision(Bus(), FakeClock(), c)
    assert backend is not None and obs is not None and obs.backend is backend
    # the model and endpoint come from the planner's configuration
    assert (backend.name, backend.model, backend.provider.base_url) == (
        "anthropic", "pm", "http://h:2/v1")


def test_planner_vision_builds_no_backend_when_vision_is_none(monkeypatch: Any) -> None:
    import solarian_agent.models.wiring as mod

    built: list[tuple[Any, ...]] = []
    real = mod.build_vision_backend

    def spy(*args: Any) -> Any:
        built.append(args)
        return real(*args)

    monkeypatch.setattr(mod, "build_vision_backend", spy)
    assert planner_vision(Bus(), FakeClock(), cfg()) == (None, None)
    assert built == []
    c = cfg(runtime={"vision_camera": "top"})
    planner_vision(Bus(), FakeClock(), c, vision="cv")
    assert built == [("cv", c)]


def test_the_planner_s_observer_runs_on_the_given_clock() -> None:
    bus, clock = Bus(), FakeClock()
    be = SizingBackend()
    _, obs = planner_vision(bus, clock, cfg(cameras=["wrist"]), vision="cv", backend=be)
    assert obs is not None and obs.clock is clock
    bus.publisher(names.image_topic("wrist"), names.T_IMAGE).publish(
        Image(np.zeros((48, 64, 3), np.uint8), clock.now(), "wrist", 1))
    assert obs.offered()  # the camera's freshness is read on that clock
    res = obs.observe_scene("cup")
    assert (res.observed_at, res.observed_at_wall) == (clock.now(), clock.wall())
    assert res.description == "saw 64x48 from wrist"
