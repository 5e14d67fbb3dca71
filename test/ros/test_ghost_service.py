"""A service server killed with SIGKILL and restarted is answered at once, on real rclpy.

The root cause of a restarted planner that did not answer ``agent/message`` within 60 s: a
node that dies without leaving stays in every other participant's discovery for its DDS lease
(Fast DDS's default: 20 s).  While that ghost server is listed, a fresh client's
``wait_for_service`` is satisfied by it at once, and a request sent then was delayed or lost
(8 of 8 unanswered within 5 s here).  The package's Fast DDS profile (config/fastdds.xml)
forgets a quiet participant after 3 s; this test fails without it: the server is restarted as
the launcher respawns a node (2 s after it died), a fresh client calls at once, and each request
must be answered within 8 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from _rostest_util import free_domain, prepare_environment

from solarian_agent.ros.processes import release_domain

pytestmark = [pytest.mark.usefixtures("real_ros"), pytest.mark.timeout(120)]

RESPAWN_DELAY_S = 2.0  # the launcher's default respawn_delay (ros/launch_plan.py)

SERVER = """
import sys
import rclpy
from rclpy.node import Node
from solarian_agent.ros.ros_types import interface_class
rclpy.init()
node = Node("ghost_server_" + sys.argv[1])
cls = interface_class("solarian_agent/srv/AgentCommand")
def answer(req, resp):
    resp.ok = True
    resp.reason = sys.argv[1]
    return resp
node.create_service(cls, "ghost/message", answer)
print("ready", flush=True)
rclpy.spin(node)
"""


class Server:
    """The server as a process of its own process group (killed with the test)."""

    def __init__(self, tag: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, tag], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().strip() == "ready":
                ready.set()

        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(60.0), f"server {tag} did not start"

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10.0)


def test_a_service_restarted_after_a_kill_9_is_answered_while_its_ghost_fades(real_ros):
    from _rostest_util import Probe

    from solarian_agent.ros.ros_types import interface_class

    prepare_environment()  # the package's DDS profile, as the graph's nodes get it
    domain = free_domain()
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    cls = interface_class("solarian_agent/srv/AgentCommand")
    probe = Probe(domain)
    servers: list[Server] = []
    try:
        servers.append(Server("s0", env))
        answers = []
        for i in range(1, 4):
            servers[-1].kill()
            time.sleep(RESPAWN_DELAY_S)  # as the launcher restarts a dead node: not a sync
            servers.append(Server(f"s{i}", env))
            t0 = time.monotonic()
            client = probe.on_spin_thread(lambda: probe.node.create_client(cls, "ghost/message"))
            try:
                assert client.wait_for_service(timeout_sec=30.0)
                done = threading.Event()
                fut = client.call_async(cls.Request(text="hello", by="test"))
                fut.add_done_callback(lambda _f, d=done: d.set())
                answered = done.wait(8.0)
                answers.append((answered, time.monotonic() - t0,
                                fut.result().reason if answered else None))
            finally:
                probe.on_spin_thread(lambda c=client: probe.node.destroy_client(c))
        print("FIGURES restarted service answered (ok, s, by):",
              [(a, round(t, 2), b) for a, t, b in answers])
        assert all(a for a, _t, _b in answers), answers
        assert [b for _a, _t, b in answers] == ["s1", "s2", "s3"], answers
    finally:
        for s in servers:
            s.kill()
        probe.close()
        release_domain(domain)
