"""What the monitor sees: the first-frame rule, history labelled by age, close-ups at capture
resolution, no overlays, the target mark's geometry and the reference frames."""

import cv2
import numpy as np
import pytest
from monitor_helpers import PROGRESS, Rig, choice, config, grip_tool

from solarian_agent.core.monitor import box_to_sent, draw_mark, history_labels, mask_bounds
from solarian_agent.perception import images as im

Q = [{**PROGRESS, "when": {"do": "escalate", "value": "failed"}}]


def images_of(rig, n=-1):
    return rig.backend.requests[n].images


def test_first_frame_is_only_kept_with_history_2(tmp_path):
    from solarian_agent.core.episode_log import EpisodeLog

    log = EpisodeLog(tmp_path, __import__("solarian_agent.core.clock",
                                          fromlist=["FakeClock"]).FakeClock())
    rig = Rig(Q, log=log)
    rig.start()
    rig.tick()
    assert rig.backend.requests == []
    (ev,) = rig.events("monitor_frame")
    assert ev["action_id"] == "a1" and ev["images"][0]["camera"] == "cam"
    # the kept frame is saved, so the log can replay it
    assert (tmp_path / ev["images"][0]["file"]).exists()
    rig.tick()
    assert len(rig.backend.requests) == 1
    assert [i.label for i in images_of(rig)] == ["previous", "current"]


def test_history_1_judges_the_first_frame():
    rig = Rig(Q, config=config(history=1))
    rig.start()
    rig.tick()
    assert len(rig.backend.requests) == 1
    assert [i.label for i in images_of(rig)] == ["current"]
    assert rig.events("monitor_frame") == []


def test_history_labels_by_age_oldest_first():
    rig = Rig(Q, config=config(history=3))
    rig.start()
    for _ in range(4):
        rig.tick()
    imgs = images_of(rig)
    assert [i.label for i in imgs] == ["3.0 s ago", "previous", "current"]
    assert [i.age_s for i in imgs] == [3.0, 1.5, 0.0]
    # oldest first: capture stamps increase
    assert imgs[0].stamp < imgs[1].stamp < imgs[2].stamp
    assert history_labels([1.0, 2.5], 2.5) == ["previous", "current"]
    # the caption says the age of the previous frame
    assert "previous, 1.5 s ago" in imgs[1].caption()


def test_history_is_per_camera_oldest_first():
    rig = Rig(Q, cameras=("wrist", "overhead"))
    rig.start()
    rig.tick()
    rig.tick()
    assert [(i.camera, i.label) for i in images_of(rig)] == [
        ("wrist", "previous"), ("wrist", "current"), ("overhead", "previous"),
        ("overhead", "current")]


def test_close_up_is_the_region_at_capture_resolution_and_others_are_resized():
    cfg = config(close_ups={"wrist": [0.25, 0.5, 0.75, 0.9]}, image_max_side=200,
                 history=1)
    rig = Rig(Q, config=cfg, cameras=("wrist", "overhead"), frame_size=(480, 640))
    rig.start()
    rig.tick()
    wrist, over = images_of(rig)
    frame = rig.engine.frames["wrist"].latest().data
    # pixel-exact: rows 240..432, columns 160..480 of the capture, not resized
    assert wrist.close_up and (wrist.width, wrist.height) == (320, 192)
    assert np.array_equal(wrist.pixels, frame[240:432, 160:480])
    # sent losslessly enough: the encoded close-up decodes at the same size
    dec = cv2.imdecode(np.frombuffer(wrist.data, np.uint8), cv2.IMREAD_COLOR)
    assert dec.shape == (192, 320, 3)
    assert not over.close_up and (over.width, over.height) == (200, 150)
    ovf = rig.engine.frames["overhead"].latest().data
    assert np.array_equal(over.pixels, im.resize_max_side(ovf, 200)[0])


def test_monitor_frames_carry_no_overlays():
    # a tracker overlay drawn for the planner must never reach the monitor: what is sent is
    # the raw capture's pixels
    rig = Rig(Q, config=config(close_ups={"cam": [0.0, 0.0, 1.0, 1.0]}, history=1),
              target_box=lambda *a: (10, 10, 50, 50))  # mark_target off: the port is unused
    rig.start()
    rig.tick()
    (img,) = images_of(rig)
    assert np.array_equal(img.pixels, rig.engine.frames["cam"].latest().data)
    assert img.mark is None and not rig.backend.requests[-1].marked


def test_mark_target_asks_the_port_and_skips_a_target_outside_the_close_up():
    seen = []

    def target_box(action_id, trackers, camera, frame):
        seen.append((action_id, tuple(trackers), camera, frame.seq))
        return (100, 120, 140, 150)  # left of the close-up, which starts at x = 160

    cfg = config(close_ups={"cam": [0.25, 0.25, 0.75, 0.75]}, mark_target=True, history=1)
    rig = Rig(Q, config=cfg, target_box=target_box)
    rig.start(trackers=["cam.target"])
    rig.tick()
    (img,) = images_of(rig)
    assert seen == [("a1", ("cam.target",), "cam", img.seq)]
    assert img.mark is None and not rig.backend.requests[-1].marked
    assert np.array_equal(img.pixels, rig.engine.frames["cam"].latest().data[120:360, 160:480])


def test_mark_geometry_inside_a_close_up():
    cfg = config(close_ups={"cam": [0.25, 0.25, 0.75, 0.75]}, mark_target=True, history=1)
    rig = Rig(Q, config=cfg, target_box=lambda *a: (200, 150, 240, 180))
    rig.images["cam"] = np.full((480, 640, 3), 90, np.uint8)
    rig.start()
    rig.tick()
    (img,) = images_of(rig)
    # capture (200..240, 150..180) is close-up (40..80, 30..60)
    assert img.mark == (40, 30, 80, 60)
    changed = np.any(img.pixels != 90, axis=2)
    ys, xs = np.nonzero(changed)
    assert (xs.min(), ys.min(), xs.max(), ys.max()) == (37, 27, 83, 63)
    # exactly the 1 px outline, and nothing inside it (the target's pixels are untouched)
    outline = np.zeros_like(changed)
    outline[27, 37:84] = outline[63, 37:84] = True
    outline[27:64, 37] = outline[27:64, 83] = True
    assert np.array_equal(changed, outline)
    assert tuple(int(c) for c in img.pixels[27, 50]) == (255, 255, 0)  # BGR cyan


def test_mark_on_a_resized_view_stays_outside_the_target():
    box = (301, 201, 340, 260)
    s = im.Scaling(640, 480, 320, 240)
    sb = box_to_sent(box, s)
    assert sb == (150, 100, 170, 130)
    # every sent pixel the target touches lies inside the sent bounds
    for x, y in [(301, 201), (340, 260), (320, 230)]:
        assert sb[0] <= x // 2 <= sb[2] and sb[1] <= y // 2 <= sb[3]
    assert box_to_sent((0, 0, 10, 10), im.Scaling(640, 480, 100, 100, 200, 200, 100, 100)) \
        is None
    img = draw_mark(np.zeros((20, 20, 3), np.uint8), (0, 0, 5, 5))
    # the sides that fall outside the image are not drawn onto its edge: only x = 8 and y = 8
    ys, xs = np.nonzero(img.any(axis=2))
    assert set(zip(xs.tolist(), ys.tolist(), strict=True)) == ({(8, y) for y in range(9)}
                                                               | {(x, 8) for x in range(9)})
    assert mask_bounds(np.pad(np.ones((3, 4), bool), ((5, 2), (7, 1)))) == (7, 5, 10, 7)


def test_reference_frames_come_first_with_the_planners_point():
    tool = grip_tool(Q, image_points=["point"], camera="cam")
    rig = Rig(Q, config=config(reference=True, history=2),
              catalogue=[tool, grip_tool([], "home_holding")])
    rig.images["cam"] = np.full((480, 640, 3), 90, np.uint8)
    rig.start(params={"point": [320.0, 240.0]})
    rig.tick()
    rig.tick()
    req = rig.backend.requests[-1]
    ref, prev, cur = req.images
    assert ref.reference and ref.label == "reference" and req.reference
    assert (prev.label, cur.label) == ("previous", "current")
    # the point is drawn on the reference (magenta), never on the monitored frames
    mag = np.all(ref.pixels == (255, 0, 255), axis=2)
    ys, xs = np.nonzero(mag)
    assert mag.any() and abs(xs.mean() - 256) < 3 and abs(ys.mean() - 192) < 3  # 512 px side
    assert not np.all(cur.pixels == (255, 0, 255), axis=2).any()
    assert ref.age_s == pytest.approx(3.0)
    # the same reference frame on the next tick, older
    rig.tick()
    assert rig.backend.requests[-1].images[0].stamp == ref.stamp


def test_reference_off_sends_none():
    rig = Rig(Q, config=config(reference=False))
    rig.start(params={"point": [1, 1]})
    rig.tick()
    rig.tick()
    assert not any(i.reference for i in images_of(rig))


def test_readings_are_sent_filtered_by_state_fields():
    rig = Rig(Q, state_fields={"joints": ["gripper"]})
    rig.backend.script = [{"progress": choice("approaching", 0.9)}]
    rig.start()
    rig.tick()
    rig.tick()
    assert rig.backend.requests[-1].readings == {"joints": {"gripper": 0.02}}


def test_tracker_port_gives_mask_bounds_else_the_box():
    from solarian_agent.core.executor import TrackerResult
    from solarian_agent.core.messages import Image
    from solarian_agent.core.monitor import tracker_target_box

    mask = np.zeros((48, 64), bool)
    mask[10:20, 30:41] = True
    results = {"wrist.target": TrackerResult(0.01, (30, 10, 41, 20), mask),
               "overhead.target": TrackerResult(0.01, (5, 6, 9, 12), None)}
    fn = tracker_target_box(results.get)
    frame = Image(np.zeros((48, 64, 3), np.uint8), 0.0, "wrist")
    trackers = ["wrist.target", "overhead.target"]
    assert fn("a1", trackers, "wrist", frame) == (30, 10, 40, 19)
    assert fn("a1", trackers, "overhead", frame) == (5, 6, 8, 11)  # box: exclusive ends
    assert fn("a1", trackers, "side", frame) is None
