"""Views for the planner: look / watch / keep / pin, fixed views, and descriptions
from a named vision model for a planner that reads no images."""

import numpy as np
import pytest
from monitor_helpers import FakeBackend, pattern

from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ToolCallRejected
from solarian_agent.core.messages import Image
from solarian_agent.core.model_api import ImagePart, TextPart
from solarian_agent.core.observations import ObservationStore
from solarian_agent.core.views import ViewManager


class Cams:
    def __init__(self, clock, names=("wrist", "overhead")):
        self.clock = clock
        self.seq = 0
        self.names = names

    def __call__(self, cam):
        self.seq += 1
        return Image(pattern(480, 640, self.seq), self.clock.now() - 0.1, cam, self.seq)


def make(reads_images=True, describer=None, fixed=(), side=320):
    clock = FakeClock()
    store = ObservationStore(clock, side, 30.0, grid=False)
    cams = Cams(clock)
    vm = ViewManager(clock, store, cams, ["wrist", "overhead"], reads_images=reads_images,
                     describer=describer, fixed=fixed)
    return vm, store, clock, cams


def images(parts):
    return [p for p in parts if isinstance(p, ImagePart)]


def texts(parts):
    return [p.text for p in parts if isinstance(p, TextPart)]


def test_tool_defs():
    vm, *_ = make()
    assert [d.name for d in vm.tool_defs()] == ["look", "watch", "unwatch", "unpin"]
    look = vm.tool_defs()[0].parameters
    assert look["properties"]["camera"]["enum"] == ["wrist", "overhead"]


def test_look_puts_a_view_of_each_camera_in_the_result_with_ids():
    vm, store, *_ = make()
    parts = vm.handle("look", {})
    imgs = images(parts)
    assert [i.label for i in imgs] == ["wrist", "overhead"]
    assert all(store.get(i.observation_id) is not None for i in imgs)
    assert (imgs[0].width, imgs[0].height) == (320, 240)
    assert texts(parts)[0].startswith(f"{imgs[0].observation_id}: wrist camera, 320x240 px")


def test_look_at_a_region_maps_points_back_to_capture_pixels():
    vm, store, *_ = make(side=1000)
    (img,) = images(vm.handle("look", {"camera": "wrist", "region": [0.5, 0.5, 1.0, 1.0]}))
    assert (img.width, img.height) == (320, 240)  # the region at capture resolution
    x, y = store.map_point(img.observation_id, [10, 20], "wrist")
    assert (x, y) == pytest.approx((330.0, 260.0))
    obs = store.get(img.observation_id)
    assert np.array_equal(obs.frame.data[240:, 320:][20, 10], obs.frame.data[260, 330])


@pytest.mark.parametrize("args,msg", [
    ({"camera": "ceiling"}, "unknown"),
    ({"camera": "wrist", "region": [0.5, 0.5, 0.4, 1]}, "region"),
    ({"region": [0, 0, 1, 1]}, "needs a camera"),
    ({"keep": 99}, "keep"),
    ({"zoom": 2}, "takes"),
    ({"pin": ""}, "pin"),
])
def test_bad_looks_are_refused(args, msg):
    vm, *_ = make()
    with pytest.raises(ToolCallRejected, match=msg):
        vm.handle("look", args)


def test_a_view_stays_for_the_next_reply_only_by_default():
    vm, *_ = make()
    vm.handle("look", {"camera": "wrist"})
    assert vm.images_for_turn() == []


def test_keep_keeps_the_views_of_the_last_looks():
    vm, *_ = make()
    first = images(vm.handle("look", {"camera": "wrist", "keep": 2}))[0].observation_id
    # the look's own result showed it; the next turn does not repeat it
    assert vm.images_for_turn() == []
    second = images(vm.handle("look", {"camera": "overhead"}))[0].observation_id
    turn = vm.images_for_turn()
    assert [i.observation_id for i in images(turn)] == [first]
    assert "kept from an earlier look" in texts(turn)[0]
    vm.handle("look", {"camera": "wrist"})
    vm.handle("look", {"camera": "wrist"})
    # the last two looks are in this turn's results; the older ones are no longer kept
    assert vm.images_for_turn() == []
    ids = [i.observation_id for i in images(vm.images_for_turn())]
    assert first not in ids and second not in ids and len(ids) == 2


def test_pin_until_unpin():
    vm, *_ = make()
    pid = images(vm.handle("look", {"camera": "overhead", "pin": "before"}))[0].observation_id
    for _ in range(3):
        turn = vm.images_for_turn()
        assert [i.observation_id for i in images(turn)] == [pid]
        assert 'pinned as \u27e6planner: "before"\u27e7' in texts(turn)[0]
    assert vm.handle("unpin", {"name": "before"}) == [
        TextPart('unpinned \u27e6planner: "before"\u27e7')]
    assert vm.images_for_turn() == []
    with pytest.raises(ToolCallRejected, match="no view is pinned"):
        vm.handle("unpin", {"name": "before"})


def test_watch_brings_fresh_views_every_turn_until_unwatch():
    vm, *_ = make()
    vm.handle("watch", {"cameras": ["wrist"]})
    a = images(vm.images_for_turn())
    b = images(vm.images_for_turn())
    assert [i.label for i in a] == ["wrist"] and a[0].observation_id != b[0].observation_id
    vm.handle("watch", {})
    assert [i.label for i in images(vm.images_for_turn())] == ["wrist", "overhead"]
    vm.handle("unwatch", {})
    assert vm.images_for_turn() == []
    with pytest.raises(ToolCallRejected, match="unknown cameras"):
        vm.handle("watch", {"cameras": ["x"]})


def test_runtime_cameras_come_with_every_turn():
    vm, *_ = make(fixed=["overhead"])
    for _ in range(2):
        turn = vm.images_for_turn()
        assert [i.label for i in images(turn)] == ["overhead"]
        assert "comes with every turn" in texts(turn)[0]
    vm.handle("unwatch", {})
    assert len(images(vm.images_for_turn())) == 1
    with pytest.raises(ValueError, match="runtime.cameras"):
        make(fixed=["ceiling"])


def test_a_planner_that_reads_no_images_gets_descriptions():
    be = FakeBackend()
    vm, *_ = make(reads_images=False, describer=be)
    prepared = vm.prepare("look", {"camera": "wrist", "region": [0, 0, 0.5, 0.5], "pin": "p"})
    assert be.describe_calls == []  # capturing never calls a model
    parts = prepared.render()
    assert images(parts) == []
    (frame, focus), = be.describe_calls
    assert (frame.width, frame.height) == (320, 240)  # the region, not the whole frame
    t = " ".join(texts(parts))
    assert "Described by the vision model fake/fake-vision" in t and "a scene (320x240)" in t
    assert "may be wrong" in t
    # the pinned copy reuses the description: no second call
    vm.images_for_turn()
    assert len(be.describe_calls) == 1


def test_no_describer_says_so():
    vm, *_ = make(reads_images=False)
    (t,) = texts(vm.handle("look", {"camera": "wrist"}))
    assert "no vision model is configured" in t


def test_no_frame_yet():
    clock = FakeClock()
    vm = ViewManager(clock, ObservationStore(clock, 320, 30.0), lambda c: None, ["wrist"],
                     reads_images=True)
    with pytest.raises(ToolCallRejected, match="no camera"):
        vm.handle("look", {})
    assert vm.images_for_turn() == []


def _views(frames):
    """A view manager on one camera, ``wrist``, whose frames ``frames`` returns."""
    clock = FakeClock()
    store = ObservationStore(clock, 320, 30.0, grid=False)
    return ViewManager(clock, store, frames, ["wrist"], reads_images=True)


def test_a_rejected_look_does_not_change_keep():
    vm = _views(lambda cam: None)  # no frame yet
    with pytest.raises(ToolCallRejected):
        vm.prepare("look", {"keep": 3})
    assert vm.keep == 0
    vm.pins = {f"p{i}": [] for i in range(8)}
    with pytest.raises(ToolCallRejected):
        vm.prepare("look", {"keep": 2, "pin": "one more"})
    assert vm.keep == 0


def test_a_pin_name_is_trimmed_everywhere():
    vm = _views(lambda cam: Image(pattern(48, 64), 0.0, cam, 1))
    for i in range(8):
        vm.prepare("look", {"pin": f"p{i}"})
    vm.prepare("look", {"pin": " p3 "})  # replaces p3: no ninth pin, no refusal
    assert sorted(vm.pins) == [f"p{i}" for i in range(8)]
    vm.prepare("unpin", {"name": " p3 "})
    assert "p3" not in vm.pins
