"""``solarian-agent bench ros``: the node graph under real rclpy, in one run.

* CPU of each node (share of one core, from ``/proc/<pid>/stat``) over a window while idle and
  during a tidy-up run, beside a bare rclpy talker / listener pair carrying the same images and
  joint states at the same rates (:mod:`.bench_baseline`), measured at the same time in a
  domain of its own;
* camera frames: latency (capture stamp to arrival) and delivered rate at a subscriber with the
  monitor's QoS, for the sim world's overhead camera and for the baseline talker;
* a skill goal's round trip (goal sent to result received) for a skill that ends at once, beside
  a bare rclpy action server that succeeds at once;
* cancel to stopped: a cancel request to the result of a running skill, in seconds and in the
  skills node's control ticks, beside the bare server polling for cancels every tick.

The graph is the one ``sim.launch.py`` starts (:func:`launch_plan.sim_plan`), with the offline
planner and monitor, plus the toy test skills in namespace ``toy`` (a skill that runs until
stopped, for the cancels).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import launch_plan
from .components import share_dir
from .processes import NodeProcesses, free_domain, with_dds_profile

TASK = "put the red cup on the tray and the yellow paper in the bin"
CONTROL_PERIOD_S = 0.02  # config/controller.yaml's control_period_s


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_over(pids: dict[str, int], seconds: float,
             until: Callable[[], bool] | None = None) -> dict[str, float]:
    """Each process's CPU as a share of one core over ``seconds`` (or until ``until()``)."""
    a = {k: _cpu_seconds(p) for k, p in pids.items()}
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end and not (until is not None and until()):
        time.sleep(0.1)
    dt = time.monotonic() - t0
    return {k: (_cpu_seconds(p) - a[k]) / dt for k, p in pids.items()}


def _pct(v: float) -> float:
    return round(100.0 * v, 1)


def _baseline(workdir: Path) -> tuple[dict[str, subprocess.Popen[bytes]], int]:
    domain = free_domain()
    env = dict(NodeProcesses(workdir, domain=domain).env())
    procs = {role: subprocess.Popen(
        [sys.executable, "-m", "solarian_agent.ros.bench_baseline", role],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for role in ("talker", "listener", "action_server")}
    return procs, domain


def _frames(probe: Any, topic: str, seconds: float) -> tuple[float, float]:
    """Median latency (s) and delivered rate (Hz) of ``topic`` at a sensor-QoS subscriber."""
    got: list[tuple[float, float]] = []

    def cb(msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        got.append((time.time(), stamp))

    sub = probe.subscribe("sensor_msgs/msg/Image", topic, cb, "sensor")
    time.sleep(1.0)  # matched
    got.clear()
    time.sleep(seconds)
    probe.unsubscribe(sub)
    if len(got) < 2:
        return float("nan"), 0.0
    lat = statistics.median(t - s for t, s in got)
    rate = (len(got) - 1) / (got[-1][0] - got[0][0])
    return lat, rate


def _round_trips(probe: Any, action: str, tool: str, n: int,
                 generation: Callable[[], int]) -> list[float]:
    client = probe.action_client(action)
    out = []
    for i in range(n):
        t0 = time.monotonic()
        gh = probe.send_goal(client, probe.goal(tool, "{}", generation(), f"rt{i}"))
        probe.result(gh)
        out.append(time.monotonic() - t0)
    return out


def _cancels(probe: Any, action: str, tool: str, n: int,
             generation: Callable[[], int]) -> list[float]:
    from .probe import wait_until

    client = probe.action_client(action)
    out = []
    for i in range(n):
        fb: list[Any] = []
        gh = probe.send_goal(client, probe.goal(tool, "{}", generation(), f"c{i}"),
                             feedback=fb)
        result = gh.get_result_async()
        wait_until(lambda: fb, 10.0)  # noqa: B023
        time.sleep(0.1)
        t0 = time.monotonic()
        gh.cancel_goal_async()
        if wait_until(result.done, 10.0):
            out.append(time.monotonic() - t0)
    return out


def _generation(probe: Any, topic: str) -> Callable[[], int]:
    def get() -> int:
        got = probe.messages("solarian_agent/msg/Generation", topic, "latched", timeout_s=10.0)
        return int(got[-1].value) if got else 1
    return get


Row = dict[str, Any]
NODES = ("sim_world", "skills", "monitor", "planner")


def run(quick: bool = False) -> list[Row]:
    from .probe import Probe

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # for the probes
    with_dds_profile(os.environ)  # type: ignore[arg-type]
    window = 10.0 if quick else 30.0
    n = 10 if quick else 30
    work = Path(tempfile.mkdtemp(prefix="solarian_bench_ros_"))
    g = _start_graph(work / "graph")
    base, base_domain = _baseline(work / "baseline")
    probe = Probe(g.domain, name="bench_probe")
    bprobe = Probe(base_domain, name="bench_baseline_probe")
    try:
        for key, proc in g.procs.items():
            name = key.rsplit("/", 1)[-1]
            if not proc.wait_for_output(f"{name} running", 120.0):
                raise RuntimeError(f"{key} did not come up:\n{g.outputs()}")
        time.sleep(3.0)  # past start-up
        pids = {k: p.popen.pid for k, p in g.procs.items() if k != "toy/skills"}
        pids.update({f"baseline {r}": p.pid for r, p in base.items() if r != "action_server"})
        rows = _idle_rows(cpu_over(pids, window))
        rows += _frame_rows(probe, bprobe, 5.0 if quick else 10.0)
        rows += _goal_rows(probe, bprobe, n)
        rows += _tidy_rows(probe, pids)
    finally:
        probe.close()
        bprobe.close()
        g.close()
        _stop_baseline(base)
    return rows


def _start_graph(workdir: Path) -> NodeProcesses:
    """The graph sim.launch.py starts, offline, and the toy skills in namespace ``toy``."""
    g = NodeProcesses(workdir)
    g.start_plan(launch_plan.sim_plan({"planner_provider": "rules", "seed": "1",
                                       "robot_state_publisher": "false"}, share_dir()))
    g.start("skills_node", "skills", {"tool_set": "toy", "cameras": "overhead"},
            namespace="toy")
    return g


def _stop_baseline(base: dict[str, subprocess.Popen[bytes]]) -> None:
    for p in base.values():
        p.send_signal(2)
    for p in base.values():
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def _idle_rows(idle: dict[str, float]) -> list[Row]:
    rows: list[Row] = []
    listener = _pct(idle["baseline listener"])
    for k in NODES:
        ref = "baseline talker" if k == "sim_world" else "baseline listener"
        rows.append({"name": f"cpu idle: {k}", "value": _pct(idle[k]), "unit": "% of a core",
                     "baseline": _pct(idle[ref]),
                     "note": f"{ref} (same images and joint states); target <= 2x the "
                             f"listener ({2 * listener:.1f} %)" if k != "sim_world"
                     else "the talker publishes what the sim world publishes, no physics"})
    return rows


def _frame_rows(probe: Any, bprobe: Any, seconds: float) -> list[Row]:
    lat, rate = _frames(probe, "overhead/image_raw", seconds)
    blat, brate = _frames(bprobe, "overhead/image_raw", seconds)
    return [{"name": "overhead frame latency (capture to a subscriber)",
             "value": round(lat * 1000, 2), "unit": "ms",
             "baseline": round(blat * 1000, 2), "note": "median; baseline talker"},
            {"name": "overhead frames delivered", "value": round(rate, 2), "unit": "Hz",
             "baseline": round(brate, 2), "note": "published at 10 Hz"}]


def _goal_rows(probe: Any, bprobe: Any, n: int) -> list[Row]:
    rt = _round_trips(probe, "skills/stop", "stop", n, _generation(probe, "skills/generation"))
    brt = _round_trips(bprobe, "skills/stop", "stop", n, lambda: 1)
    rows: list[Row] = [
        {"name": "skill goal round trip (stop: ends at once)",
         "value": round(statistics.median(rt) * 1000, 1), "unit": "ms",
         "baseline": round(statistics.median(brt) * 1000, 1),
         "note": f"median of {n}; p95 {sorted(rt)[int(0.95 * (n - 1))] * 1000:.1f} "
                 "ms; baseline: a bare rclpy action server"}]
    cn = _cancels(probe, "toy/skills/spin", "spin", max(5, n // 3),
                  _generation(probe, "toy/skills/generation"))
    bcn = _cancels(bprobe, "skills/spin", "spin", max(5, n // 3), lambda: 1)
    med = statistics.median(cn) if cn else float("nan")
    rows.append({"name": "cancel to stopped", "value": round(med * 1000, 1), "unit": "ms",
                 "baseline": round(statistics.median(bcn) * 1000, 1) if bcn else "",
                 "note": f"{med / CONTROL_PERIOD_S:.1f} control ticks of 20 ms (median "
                         f"of {len(cn)}); baseline polls its cancel every 20 ms"})
    return rows


def _tidy_rows(probe: Any, pids: dict[str, int]) -> list[Row]:
    """A tidy run through the graph: each node's CPU during it, and how it ended."""
    from .probe import wait_until

    states = probe.listen("solarian_agent/msg/AgentState", "agent/state", "latched")
    r = probe.call("solarian_agent/srv/AgentCommand", "agent/message", text=TASK,
                   by="bench", timeout_s=60.0)
    if not r.ok:
        raise RuntimeError(f"the task was refused: {r.reason}")
    t0 = time.monotonic()
    wait_until(lambda: states and states[-1].status == "running", 30.0)

    def ended() -> bool:
        return bool(states) and states[-1].status in ("succeeded", "failed", "cancelled",
                                                       "budget_exhausted")

    busy = cpu_over(pids, 300.0, until=ended)
    took = time.monotonic() - t0
    status = states[-1].status if states else "?"
    rows: list[Row] = [{"name": f"cpu during a tidy run: {k}", "value": _pct(busy[k]),
                        "unit": "% of a core", "baseline": _pct(busy["baseline listener"]),
                        "note": f"run {status} in {took:.1f} s; baseline listener"}
                       for k in NODES]
    truth = probe.messages("solarian_agent/msg/SimTruth", "sim/ground_truth", "latched")
    if truth:
        t = json.loads(truth[-1].truth_json)
        rows.append({"name": "tidy run through the graph", "value": took, "unit": "s",
                     "baseline": "", "note": f"{status}; truth: tray {t['in_tray']}, "
                                             f"bin {t['in_bin']}"})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from ..benchmarks import format_table

    rows = run(quick="--quick" in (argv or sys.argv[1:]))
    print(format_table({"suite": "ros", **r} for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
