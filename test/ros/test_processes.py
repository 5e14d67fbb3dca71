"""The graph's nodes never outlive whoever started them: killed with their parent (even by
SIGKILL, when no clean-up can run) and reaped group by group on close."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its reaper is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_node_dies_with_the_process_that_started_it(real_ros, tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from solarian_agent.ros.processes import NodeProcesses
        g = NodeProcesses({str(tmp_path)!r})
        p = g.start("sim_node", "sim_world", {{}})
        print(p.popen.pid, flush=True)
        time.sleep(600)
    """)
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        node_pid = int(owner.stdout.readline())
        end = time.monotonic() + 60
        while time.monotonic() < end and "sim_world running" not in (
                tmp_path / "sim_world.log").read_text(errors="replace"):
            time.sleep(0.2)
        assert _alive(node_pid)
        owner.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel acts
        owner.wait(10)
        end = time.monotonic() + 10
        while time.monotonic() < end and _alive(node_pid):
            time.sleep(0.1)
        assert not _alive(node_pid), "the node outlived the process that started it"
    finally:
        if owner.poll() is None:
            owner.kill()


def test_close_reaps_a_node_that_ignores_sigint(real_ros, tmp_path):
    from solarian_agent.ros.processes import NodeProcesses

    g = NodeProcesses(tmp_path)
    p = g.start("sim_node", "sim_world", {})
    assert p.wait_for_output("sim_world running", 60.0), p.output()
    os.kill(p.popen.pid, signal.SIGSTOP)  # a hung node: SIGINT does nothing
    codes = g.close(timeout_s=2.0)
    assert codes["sim_world"] is None  # it did not exit by itself ...
    assert p.popen.poll() == -signal.SIGKILL  # ... and was killed with its group


def test_concurrent_processes_never_share_a_domain(tmp_path):
    """Each graph's DDS domain is held by a lock: another process on this host (another test
    run, another checkout) is never given it while it is held."""
    from solarian_agent.ros.processes import free_domain, release_domain

    mine = {free_domain() for _ in range(20)}
    code = ("from solarian_agent.ros.processes import free_domain\n"
            "print(sorted({free_domain() for _ in range(150)}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    theirs = set(json.loads(r.stdout))
    assert len(mine) == 20 and len(theirs) == 150
    assert not mine & theirs
    for d in mine:
        release_domain(d)
