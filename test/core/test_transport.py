import numpy as np
import pytest

from solarian_agent.core.errors import ServiceUnavailableError, TransportError
from solarian_agent.core.messages import Image, SkillResult
from solarian_agent.core.transport import (
    LATCHED,
    ActionServer,
    Bus,
    GoalStatus,
    QoS,
)


def test_latest_value_topic_keeps_only_newest_and_counts_drops():
    bus = Bus()
    pub = bus.publisher("t", "std_msgs/msg/Int32")
    sub = bus.subscribe("t", "std_msgs/msg/Int32", qos=QoS(depth=1))
    for i in range(5):
        pub.publish(i)
    assert sub.take() == 4
    assert sub.take() is None
    assert sub.dropped == 4
    assert sub.latest() == 4


def test_queued_topic_is_fifo_and_bounded():
    bus = Bus()
    pub = bus.publisher("q", "x/msg/X")
    sub = bus.subscribe("q", "x/msg/X", qos=QoS(depth=3))
    for i in range(5):
        pub.publish(i)
    assert sub.drain() == [2, 3, 4]
    assert sub.dropped == 2


def test_type_mismatch_is_refused():
    bus = Bus()
    bus.publisher("t", "a/msg/A")
    with pytest.raises(TransportError, match="carries a/msg/A"):
        bus.subscribe("t", "b/msg/B")


def test_latched_topic_reaches_late_subscriber():
    bus = Bus()
    pub = bus.publisher("state", "s/msg/S", LATCHED)
    pub.publish("hello")
    got = []
    bus.subscribe("state", "s/msg/S", callback=got.append, qos=LATCHED)
    assert got == ["hello"]


def test_camera_frames_pass_without_copies():
    bus = Bus()
    pub = bus.publisher("cam/image_raw", "sensor_msgs/msg/Image")
    a = bus.subscribe("cam/image_raw", "sensor_msgs/msg/Image")
    b = bus.subscribe("cam/image_raw", "sensor_msgs/msg/Image")
    data = np.zeros((480, 640, 3), np.uint8)
    data.setflags(write=False)
    frame = Image(data, 1.0, "cam", 1)
    pub.publish(frame)
    assert a.take().data is data
    assert b.take().data is data


def test_service_call_and_missing_server():
    bus = Bus()
    bus.create_service("add", "x/srv/Add", lambda r: r["a"] + r["b"])
    assert bus.call("add", {"a": 1, "b": 2}) == 3
    with pytest.raises(ServiceUnavailableError, match="nope"):
        bus.call("nope", {})
    with pytest.raises(TransportError):
        bus.create_service("add", "x/srv/Add", lambda r: 0)


def _server(bus, accept=True):
    handles = []

    def on_goal(h):
        if not accept:
            return "not today"
        handles.append(h)
        return None

    bus.create_action_server(ActionServer("act", "x/action/A", on_goal,
                                          on_cancel=lambda h: True,
                                          rejected_result=lambda r: SkillResult("", "refused",
                                                                                r)))
    return handles


def test_action_goal_feedback_result():
    bus = Bus()
    handles = _server(bus)
    fb, done = [], []
    h = bus.send_goal("act", {"n": 1}, feedback_cb=fb.append, done_cb=done.append)
    assert h.status == GoalStatus.ACCEPTED
    server_h = handles[0]
    server_h.execute()
    server_h.publish_feedback({"progress": 0.5})
    assert h.status == GoalStatus.EXECUTING and fb == [{"progress": 0.5}]
    server_h.succeed("ok")
    assert h.status == GoalStatus.SUCCEEDED and h.result == "ok" and done == [h]
    with pytest.raises(TransportError, match="already ended"):
        server_h.abort("again")


def test_action_rejection_carries_reason_and_cancel():
    bus = Bus()
    _server(bus, accept=False)
    h = bus.send_goal("act", {})
    assert h.status == GoalStatus.ABORTED
    assert h.result.outcome == "refused" and h.result.reason == "not today"
    bus2 = Bus()
    _server(bus2)
    h2 = bus2.send_goal("act", {})
    assert h2.cancel() is True
    assert h2.status == GoalStatus.CANCELING
    with pytest.raises(ServiceUnavailableError):
        bus2.send_goal("missing", {})
