"""The probe node the graph tests and the ROS benchmarks watch the graph through keeps hearing
while its caller creates and destroys subscriptions and clients from another thread as fast as
it can (as the tests do, one ``messages()`` or ``call()`` after another) and a camera floods its
topic: no error escapes its spin loop and every wait is answered.

In CI the probe once went deaf after one camera frame: an entity destroyed from the caller's
thread while the executor walked the node's entity lists raised InvalidHandle out of ``spin()``
and ended the spin thread.
"""

from __future__ import annotations

import threading

import pytest
from _rostest_util import Probe, free_domain

from solarian_agent.ros.processes import release_domain

pytestmark = pytest.mark.usefixtures("real_ros")


@pytest.fixture
def probes():
    domain = free_domain()
    talker = Probe(domain, name="probe_talker")
    listener = Probe(domain, name="probe_listener")
    try:
        yield talker, listener
    finally:
        listener.close()
        talker.close()
        release_domain(domain)


def _serve_trigger(talker: Probe) -> None:
    from solarian_agent.ros.probe import ros_type

    def answer(_req, resp):
        resp.success, resp.message = True, "pong"
        return resp

    talker.on_spin_thread(lambda: talker.node.create_service(
        ros_type("std_srvs/srv/Trigger"), "ping", answer))


def test_subscriptions_and_clients_come_and_go_while_frames_flood_in(probes):
    import numpy as np

    from solarian_agent.ros.probe import ros_type

    talker, listener = probes
    _serve_trigger(talker)
    pub = talker.publisher("sensor_msgs/msg/Image", "image_raw", "sensor")
    frame = ros_type("sensor_msgs/msg/Image")(
        height=480, width=640, encoding="bgr8", step=1920,
        data=np.zeros(640 * 480 * 3, np.uint8).tobytes())
    stop = threading.Event()

    def flood() -> None:  # a camera at about 100 Hz
        while not stop.wait(0.01):
            pub.publish(frame)

    t = threading.Thread(target=flood, daemon=True)
    t.start()
    try:
        heard = 0
        for i in range(400):
            # a sensor-QoS subscription (it carries QoS event handlers) made and destroyed
            # while frames keep arriving: the old probe's spin thread died here with
            # "InvalidHandle: cannot use Destroyable because destruction was requested"
            got = listener.messages("sensor_msgs/msg/Image", "image_raw", "sensor",
                                    timeout_s=10.0)
            assert got, (f"deaf after {heard} frames (spin thread alive: "
                         f"{listener.thread.is_alive()}, errors: {listener.spin_errors})")
            heard += 1
            if i % 10 == 0:
                r = listener.call("std_srvs/srv/Trigger", "ping", timeout_s=10.0)
                assert r.success and r.message == "pong"
    finally:
        stop.set()
        t.join(5.0)
    assert heard == 400
    assert listener.spin_errors == [] and talker.spin_errors == []
    assert listener.thread.is_alive()


def test_entities_are_made_and_destroyed_on_the_spin_thread(probes, monkeypatch):
    _, listener = probes
    seen: list[str] = []
    node = listener.node
    for name in ("create_subscription", "destroy_subscription", "create_client",
                 "destroy_client"):
        real = getattr(node, name)

        def spy(*a, _real=real, _name=name, **kw):
            seen.append(f"{_name} on {threading.current_thread().name}")
            return _real(*a, **kw)

        monkeypatch.setattr(node, name, spy)
    listener.messages("std_msgs/msg/String", "nobody", timeout_s=0.1)
    with pytest.raises(AssertionError, match="no service"):
        listener.call("std_srvs/srv/Trigger", "nobody", timeout_s=0.1)
    assert seen == [f"{n} on probe-spin" for n in ("create_subscription", "destroy_subscription",
                                                   "create_client", "destroy_client")]


def test_an_error_on_the_spin_thread_is_recorded_and_the_probe_goes_on(probes):
    talker, listener = probes

    def boom() -> None:
        raise RuntimeError("a task that fails")

    with pytest.raises(RuntimeError, match="a task that fails"):
        listener.on_spin_thread(boom)
    pub = talker.publisher("std_msgs/msg/String", "after", "latched")
    from solarian_agent.ros.probe import ros_type

    pub.publish(ros_type("std_msgs/msg/String")(data="still here"))
    (msg,) = listener.messages("std_msgs/msg/String", "after", "latched", timeout_s=10.0)
    assert msg.data == "still here"
    assert any("a task that fails" in e for e in listener.spin_errors)
    with pytest.warns(RuntimeWarning, match="error.* out of spin_once, first: RuntimeError"):
        listener.close()  # what went wrong is reported, not lost
