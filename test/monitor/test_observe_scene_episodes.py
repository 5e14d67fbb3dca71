"""The attention episode's acquisition budget: two acquisitions for an autonomous episode
(a refused attempt takes its slot, the same focus twice is refused), none after the first
effect, no limit for the operator; a claim takes the slot that handle_claimed then uses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from observe_scene_helpers import SizingBackend, code, make

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.messages import Image
from solarian_agent.core.transport import Bus
from solarian_agent.perception.observe_scene import (
    AttentionEpisode,
    ObserveSceneRejected,
    SceneObserver,
)


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
