"""observe_scene(focus): validation, one frame, limits, no retries, timing, no image
retention, when it is offered, and the attention-episode acquisition budget."""

import gc
import weakref
from typing import Any

import numpy as np
import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.config import load_agent_config
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.messages import Image
from solarian_agent.core.model_api import ModelConfigError, ModelError
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.models.wiring import build_vision_backend, planner_vision
from solarian_agent.perception.observe_scene import (
    MAX_DESCRIPTION_CHARS,
    MAX_FRAME_BYTES,
    TRUNCATION_MARK,
    AttentionEpisode,
    BusCamera,
    CameraFrame,
    ObserveSceneRejected,
    SceneObserver,
    bound_description,
    effective_vision,
)
from solarian_agent.perception.vision import Description


class Backend:
    name = "fake"
    model = "fake-vision"

    def __init__(self, text="a red cup on the table", clock=None, advance=0.0, error=None):
        self.text, self.clock, self.advance, self.error = text, clock, advance, error
        self.calls = 0
        self.sizes = []

    def describe(self, frame, focus, *, timeout_s):
        self.calls += 1
        self.sizes.append(len(frame.data))
        if self.clock is not None:
            self.clock.advance(self.advance)  # the model takes its time
        if self.error is not None:
            raise self.error
        return Description(self.text, model=self.model)

    def answer_tick(self, request, *, timeout_s):  # pragma: no cover - not used here
        raise NotImplementedError


class Camera:
    def __init__(self, clock, size=1000, running=True):
        self.clock, self.size, self.running = clock, size, running
        self.captures = 0
        self.error = None

    def capture(self):
        self.captures += 1
        if self.error is not None:
            raise self.error
        px = np.zeros((4, 4, 3), np.uint8)
        return CameraFrame(b"\0" * self.size, "image/jpeg", 640, 480, "wrist",
                           self.clock.now() - 0.05, px)


def make(backend="default", *, size=1000, running=True, app=True, advance=0.0, text=None,
         error=None):
    clock = FakeClock()
    cam = Camera(clock, size, running)
    if backend == "default":
        backend = Backend(clock=clock, advance=advance, error=error,
                          **({"text": text} if text is not None else {}))
    events = []
    obs = SceneObserver(clock, backend, cam.capture, camera="wrist",
                        camera_running=lambda: cam.running, app_running=lambda: app,
                        on_event=lambda k, d: events.append((k, d)))
    return obs, cam, backend, clock, events


def code(fn):
    with pytest.raises(ObserveSceneRejected) as e:
        fn()
    return e.value.code


@pytest.mark.parametrize("focus,expected", [
    ("", "focus_empty"), ("   \n ", "focus_empty"), (None, "focus_type"), (12, "focus_type"),
    ("x" * 301, "focus_too_long"), ("the\x07cup", "focus_control"),
    ("the cup\nand the tray", "focus_control"), ("tab\there", "focus_control"),
    ("zero\u200bwidth", "focus_control"), ("line\u2028sep", "focus_control"),
])
def test_invalid_focus_is_rejected_before_capture(focus, expected):
    obs, cam, be, _, _ = make()
    assert code(lambda: obs.observe_scene(focus)) == expected
    assert cam.captures == 0 and be.calls == 0


def test_focus_is_trimmed_and_300_characters_are_allowed():
    obs, cam, be, _, _ = make()
    res = obs.observe_scene("  " + "y" * 300 + "\n")
    assert res.focus == "y" * 300
    assert obs.observe_scene("  where is the cup? ").focus == "where is the cup?"


def test_no_other_argument_is_accepted():
    obs, cam, be, _, _ = make()
    for extra in ({"camera": "overhead"}, {"model": "x"}, {"crop": [0, 0, 1, 1]},
                  {"frames": 2}):
        assert code(lambda e=extra: obs.handle({"focus": "cup", **e})) == "extra_argument"
    assert cam.captures == 0
    assert obs.handle({"focus": "cup"}).description


def test_one_frame_is_captured_and_passed_to_the_backend():
    obs, cam, be, _, _ = make(size=1234)
    res = obs.observe_scene("the cup")
    assert cam.captures == 1 and be.calls == 1 and be.sizes == [1234]
    assert res.model_generated and res.camera == "wrist" and res.frame_bytes == 1234
    assert "model-generated" in res.text()


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


def test_inspect_self_reports_the_facts_separately_and_never_captures():
    obs, cam, _, _, _ = make()
    cam.running = False
    facts = obs.inspect_self()
    assert cam.captures == 0
    assert facts["camera"] == {"name": "wrist", "configured": True, "running": False}
    assert facts["vision"]["configured"] and facts["vision"]["model"] == "fake-vision"
    assert facts["app_running"] and not facts["observe_scene_offered"]


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


# -- attention episodes ------------------------------------------------------------------------

def test_an_autonomous_episode_gets_at_most_two_acquisitions():
    obs, cam, _, _, _ = make()
    ep = AttentionEpisode()
    obs.observe_scene("where is the cup", ep)
    assert ep.remaining == 1
    obs.inspect_self(ep)
    assert ep.remaining == 0 and ep.offer()["acquisitions"] == 0
    assert code(lambda: obs.observe_scene("where is the tray", ep)) == "acquisitions_exhausted"
    assert cam.captures == 1


def test_rejected_attempts_consume_their_slot():
    obs, cam, _, _, _ = make()
    ep = AttentionEpisode()
    assert code(lambda: obs.observe_scene("", ep)) == "focus_empty"
    assert code(lambda: obs.handle({"focus": "cup", "camera": "x"}, ep)) == "extra_argument"
    assert code(lambda: obs.observe_scene("cup", ep)) == "acquisitions_exhausted"
    assert cam.captures == 0


def test_the_same_focus_twice_is_refused_as_no_new_information():
    obs, cam, _, _, _ = make()
    ep = AttentionEpisode()
    obs.observe_scene("where is the cup", ep)
    assert code(lambda: obs.observe_scene(" where is the cup ", ep)) == "repeated"
    assert cam.captures == 1 and ep.remaining == 0


def test_no_acquisition_after_the_first_effect():
    obs, cam, _, _, _ = make()
    ep = AttentionEpisode()
    ep.record_effect()
    assert code(lambda: obs.observe_scene("cup", ep)) == "after_effect"
    with pytest.raises(ObserveSceneRejected):
        obs.inspect_self(ep)
    assert cam.captures == 0 and ep.offer() == {"acquisitions": 0, "effects": True}


def test_operator_episodes_are_not_limited_by_slots():
    obs, cam, _, _, _ = make()
    ep = AttentionEpisode(autonomous=False)
    for f in ("a", "b", "c"):
        obs.observe_scene(f, ep)
    assert cam.captures == 3


# -- configuration -----------------------------------------------------------------------------

def cfg(**agent):
    return load_agent_config({"agent": agent})


def test_vision_is_none_by_default_and_needs_a_camera_and_a_text_model():
    assert effective_vision(cfg()) == ("none", "")
    with pytest.raises(ConfigError, match="needs a camera"):
        effective_vision(cfg(runtime={"vision": "openai-responses"}))
    with pytest.raises(ConfigError, match="text cognition"):
        effective_vision(cfg(cameras=["wrist"], planner={"provider": "openai"},
                             runtime={"vision": "openai-responses"}))
    assert effective_vision(cfg(cameras=["wrist", "overhead"], planner={
        "provider": "anthropic", "model": "m"}, runtime={"vision": "anthropic"})) == (
        "anthropic", "wrist")
    assert effective_vision(cfg(runtime={"vision_camera": "overhead"}), "cv") == ("cv",
                                                                                  "overhead")
    with pytest.raises(ConfigError, match="--vision"):
        effective_vision(cfg(), "gpt-eyes")


def test_openai_vision_model_takes_precedence_and_the_key_stays_in_the_environment():
    from solarian_agent.models.wiring import build_vision_backend

    c = cfg(cameras=["wrist"])
    env = {"OPENAI_API_KEY": "sk-test-0123456789", "OPENAI_VISION_MODEL": "eyes",
           "OPENAI_MODEL": "general"}
    b = build_vision_backend("openai-responses", c, env=env)
    assert (b.name, b.model, b.provider.purpose) == ("openai_responses", "eyes", "vision")
    del env["OPENAI_VISION_MODEL"]
    assert build_vision_backend("openai-responses", c, env=env).model == "general"
    assert "sk-test" not in repr(b) and build_vision_backend("none") is None
    assert build_vision_backend("cv").name == "cv"


# ------------------------------------------------------------ exact reasons and fields (issue 23)

def reason(fn):
    with pytest.raises(ObserveSceneRejected) as e:
        fn()
    return e.value.code, str(e.value)


@pytest.mark.parametrize("focus, message", [
    (12, "focus must be a string, got int"),
    ("  ", "focus must not be empty"),
    ("x" * 301, "focus has 301 characters; at most 300 are allowed"),
    ("a\x07b\x08c\x0bd\x0ce", "focus contains control characters ('\\x07', '\\x08', '\\x0b')"),
    ("surrogate \ud800 here", "focus contains control characters ('\\ud800')"),
    ("private \ue000 use", "focus contains control characters ('\\ue000')"),
    ("unassigned \u0378 here", "focus contains control characters ('\\u0378')"),
    ("para\u2029sep", "focus contains control characters ('\\u2029')"),
])
def test_focus_rejections_say_exactly_why(focus, message):
    obs, *_ = make()
    assert reason(lambda: obs.observe_scene(focus))[1] == message


def test_a_focus_with_plain_spaces_inside_is_fine():
    obs, *_ = make()
    assert obs.observe_scene("the red  cup").focus == "the red  cup"


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

# ------------------------------------------------ wiring and self-report, exactly (issue 23)
# what inspect_self tells the planner, the slot a claim takes and handle_claimed uses, the
# observer on the bus camera, and which vision backend the configuration builds

ENV = {"OPENAI_API_KEY": "sk-test-0123456789", "ANTHROPIC_API_KEY": "sk-ant-0123456789"}


class SizingBackend:
    """Says the frame size and camera it got, records focus and timeout."""

    name = "fake"
    model = "fake-vision"

    def __init__(self) -> None:
        self.focuses: list[str] = []
        self.timeouts: list[float] = []

    def describe(self, frame: Any, focus: str, *, timeout_s: float) -> Description:
        self.focuses.append(focus)
        self.timeouts.append(timeout_s)
        return Description(f"saw {frame.width}x{frame.height} from {frame.camera}")


class Anonymous:  # a backend without a name or model attribute
    def describe(self, frame: Any, focus: str, *, timeout_s: float) -> Description:
        return Description("something")


def _observer(backend: Any = None, app: Any = lambda: True, cam: Any = lambda: True,
              events: list[Any] | None = None) -> SceneObserver:
    return SceneObserver(FakeClock(), backend, lambda: None, camera="wrist",
                         camera_running=cam, app_running=app,
                         on_event=(lambda k, d: events.append((k, d))) if events is not None
                         else None)


def test_inspect_self_reports_every_fact() -> None:
    ep = AttentionEpisode()
    assert _observer(SizingBackend()).inspect_self(ep) == {
        "app_running": True,
        "camera": {"name": "wrist", "configured": True, "running": True},
        "vision": {"configured": True, "backend": "fake", "model": "fake-vision"},
        "observe_scene_offered": True}
    assert ep.attempts == [("inspect_self", "", True)]

    def broken() -> bool:
        raise OSError("no display")

    assert _observer(None, app=broken).inspect_self() == {
        "app_running": False,
        "camera": {"name": "wrist", "configured": True, "running": True},
        "vision": {"configured": False, "backend": "none", "model": ""},
        "observe_scene_offered": False}
    anon = _observer(Anonymous(), cam=lambda: False).inspect_self()
    assert anon["vision"] == {"configured": True, "backend": "none", "model": ""}
    assert anon["camera"]["running"] is False and anon["observe_scene_offered"] is False
    unnamed = SceneObserver(FakeClock(), SizingBackend(), lambda: None, camera="",
                            camera_running=lambda: True).inspect_self()
    assert unnamed["camera"] == {"name": "", "configured": False, "running": True}


def test_claim_takes_the_slot_and_handle_claimed_uses_it() -> None:
    events: list[Any] = []
    clock = FakeClock()
    bus = Bus()
    be = SizingBackend()
    obs = SceneObserver.on_bus(bus, clock, be, "wrist", timeout_s=7.5,
                               on_event=lambda k, d: events.append((k, d)))
    bus.publisher(names.image_topic("wrist"), names.T_IMAGE).publish(
        Image(np.zeros((48, 64, 3), np.uint8), clock.now(), "wrist", 1))
    ep = AttentionEpisode()
    assert obs.claim({"focus": "  the cup "}, ep) == 0
    assert obs.claim({"focus": 5}, ep) == 1
    assert ep.attempts == [("observe_scene", "the cup", False), ("observe_scene", "", False)]
    with pytest.raises(ObserveSceneRejected) as e:
        obs.claim({"focus": "the tray"}, ep)
    assert e.value.code == "acquisitions_exhausted"
    assert events == [("observe_scene_rejected", {
        "code": "acquisitions_exhausted",
        "reason": "this attention episode already used its 2 acquisitions"})]
    res = obs.handle_claimed({"focus": " the cup"}, ep, 0)
    assert (res.focus, res.camera, res.description) == ("the cup", "wrist", "saw 64x48 from wrist")
    assert be.timeouts == [7.5] and ep.attempts[0] == ("observe_scene", "the cup", True)
    assert len(ep.attempts) == 2  # no new slot was taken
    with pytest.raises(ObserveSceneRejected) as e:
        obs.handle_claimed({"focus": "x", "model": "big", "camera": "c"}, ep, 1)
    assert e.value.code == "extra_argument"
    assert e.value.reason.startswith("observe_scene takes only focus; got camera, model (")
    assert ep.attempts[1] == ("observe_scene", "", False)


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


def test_the_scripted_vision_is_never_built_from_configuration() -> None:
    with pytest.raises(ConfigError) as e:
        build_vision_backend("scripted")
    assert e.value.path == "agent.runtime.vision"
    assert str(e.value) == ("agent.runtime.vision: the scripted vision backend is built by "
                            "tests, not from configuration")


def test_the_vision_model_falls_back_to_the_monitor_s_then_the_planner_s() -> None:
    both = cfg(planner={"provider": "openai", "model": "pm", "base_url": "http://h:1/v1"},
               monitor={"provider": "openai", "model": "mon"})
    b = build_vision_backend("openai", both, env=ENV)
    assert (b.name, b.model, b.provider.purpose) == ("openai", "mon", "vision")
    b = build_vision_backend("openai", cfg(planner={"provider": "openai", "model": "pm",
                                                    "base_url": "http://h:1/v1"}), env=ENV)
    assert (b.model, b.provider.base_url) == ("pm", "http://h:1/v1")
    # the planner's endpoint only for the planner's own provider
    b = build_vision_backend("anthropic", cfg(planner={"provider": "openai", "model": "pm",
                                                       "base_url": "http://h:1/v1"}), env=ENV)
    assert (b.name, b.model, b.provider.base_url) == ("anthropic", "pm", None)
    with pytest.raises(ModelConfigError, match="vision provider 'openai' needs a model name"):
        build_vision_backend("openai", None, env=ENV)
    assert build_vision_backend("openai", None,
                                env={**ENV, "OPENAI_MODEL": "general"}).model == "general"


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


def test_the_observe_scene_event_carries_sizes_and_timings_exactly() -> None:
    obs, cam, be, clock, events = make(text="a cup")
    res = obs.observe_scene(" the cup ")
    assert events == [("observe_scene", {
        "focus": "the cup", "camera": "wrist", "frame_bytes": 1000,
        "observed_at": clock.wall(), "latency_s": round(res.latency_s, 4),
        "truncated": False, "chars": 5, "model": "fake-vision",
        "usage": Description("").usage.as_dict()})]
    assert (res.backend, res.model, res.frame_bytes) == ("fake", "fake-vision", 1000)


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


def test_a_backend_without_name_or_model_and_a_frame_without_camera() -> None:
    clock = FakeClock()
    px = np.zeros((4, 4, 3), np.uint8)
    obs = SceneObserver(clock, Anonymous(),
                        lambda: CameraFrame(b"\0" * 10, "image/png", 4, 4, "", 1.0, px),
                        camera="wrist", camera_running=lambda: True)
    res = obs.observe_scene("cup")
    assert (res.backend, res.model, res.camera) == ("", "", "wrist")


def test_a_failing_app_check_counts_as_not_running() -> None:
    def broken() -> bool:
        raise RuntimeError("gone")

    obs = _observer(SizingBackend(), app=broken)
    with pytest.raises(ObserveSceneRejected) as e:
        obs.observe_scene("cup")
    assert (e.value.code, e.value.reason) == ("not_running", "the application is not running")


def test_vision_configuration_errors_name_their_path() -> None:
    def err(fn: Any) -> tuple[str, str]:
        with pytest.raises(ConfigError) as e:
            fn()
        return e.value.path, str(e.value)

    assert err(lambda: effective_vision(cfg(), "gpt-eyes")) == (
        "--vision", "--vision: 'gpt-eyes' is not allowed; allowed values: none, "
                    "openai-responses, openai, anthropic, cv, scripted")
    assert err(lambda: effective_vision(cfg(runtime={"vision": "cv"}))) == (
        "agent.runtime.vision_camera", "agent.runtime.vision_camera: vision 'cv' needs a "
                                       "camera: set runtime.vision_camera or agent.cameras")
    assert err(lambda: effective_vision(cfg(cameras=["wrist"], planner={"provider": "openai"}),
                                        "cv")) == (
        "agent.planner", "agent.planner: vision 'cv' needs a text cognition backend: "
                         "configure the planner's provider and model")
    # the offline planners need no model name
    for provider in ("rules", "scripted"):
        assert effective_vision(cfg(cameras=["wrist"], planner={"provider": provider}),
                                " cv ") == ("cv", "wrist")


# ------------------------------------------- defaults, exact reasons and wiring (issue 23, more)

def test_the_backend_gets_a_30_second_timeout_by_default() -> None:
    clock, be = FakeClock(), SizingBackend()
    obs = SceneObserver(clock, be, Camera(clock).capture, camera="wrist",
                        camera_running=lambda: True)
    assert obs.timeout_s == 30.0
    obs.observe_scene("cup")
    assert be.timeouts == [30.0]


def test_an_extra_argument_s_refusal_names_everything_focus_cannot_select() -> None:
    obs, cam, _, _, events = make()
    with pytest.raises(ObserveSceneRejected) as e:
        obs.handle({"focus": "cup", "resolution": "4k"})
    want = ("observe_scene takes only focus; got resolution (it cannot select a camera, file, "
            "URL, crop, exposure, resolution, provider, model or frame count)")
    assert (e.value.code, e.value.reason) == ("extra_argument", want)
    assert events == [("observe_scene_rejected", {"code": "extra_argument", "reason": want})]
    assert cam.captures == 0


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


class _Falsy(SizingBackend):
    """A backend object that is falsy (``__bool__`` False) yet configured."""

    def __bool__(self) -> bool:
        return False


def test_inspect_self_names_any_configured_backend_even_a_falsy_one() -> None:
    # a backend object that is falsy (e.g. one with __len__) is still configured: its name
    # and model are reported, never the "none" of no backend
    facts = _observer(_Falsy()).inspect_self()
    assert facts["vision"] == {"configured": True, "backend": "fake", "model": "fake-vision"}
    assert facts["observe_scene_offered"] is True


def test_the_default_vision_is_none_when_the_config_names_none() -> None:
    from dataclasses import replace

    from solarian_agent.core.config import RuntimeConfig

    blank = replace(cfg(), runtime=RuntimeConfig(vision=""))  # built in code, not loaded
    assert effective_vision(blank) == ("none", "")
    assert effective_vision(blank, "") == ("none", "")


def test_a_bad_configured_vision_names_the_configuration_path() -> None:
    from dataclasses import replace

    from solarian_agent.core.config import RuntimeConfig

    bad = replace(cfg(), runtime=RuntimeConfig(vision="gpt-eyes"))  # built in code, not loaded
    with pytest.raises(ConfigError) as e:
        effective_vision(bad)
    assert e.value.path == "agent.runtime.vision"
    assert str(e.value) == ("agent.runtime.vision: 'gpt-eyes' is not allowed; allowed values: "
                            "none, openai-responses, openai, anthropic, cv, scripted")
    with pytest.raises(ConfigError) as e:
        effective_vision(bad, "  ")  # an override, even a blank one, is the one named
    assert e.value.path == "--vision"


def test_without_an_env_mapping_the_vision_model_comes_from_the_process_environment(
        monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("OPENAI_VISION_MODEL", "eyes-from-env")
    b = build_vision_backend("openai", None)
    assert (b.name, b.model, b.provider.purpose) == ("openai", "eyes-from-env", "vision")


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
