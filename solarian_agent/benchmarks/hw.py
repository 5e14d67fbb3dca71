"""Servo-bus control loop benchmark: the real driver against the simulated bus on a pty.

Measures, for 6 STS3215 servos: read latency (SYNC_READ of positions, and of the full state
block the controller reads), write latency (SYNC_WRITE of goals), one control step, and the
rate ``ArmController.run`` holds at its configured 50 Hz.  The baseline column is the
physical reference: the time the same frames occupy a 1 Mbps wire (8N1, 10 bits a byte),
computed from the actual frame sizes; a real bus adds servo return delay and USB latency.
The pty has no baud rate, so its figures are the software's own cost.  The rows "with
health reads" run the controller with its ``HealthMonitor`` (one Present_Current READ of one
servo per tick); their baseline is the same figure without it, measured in the same run.

    solarian-agent bench hw
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from solarian_agent.core.clock import SystemClock
from solarian_agent.hw.feetech import (
    ArmController,
    ArmControllerConfig,
    FeetechArm,
    FeetechArmConfig,
    default_so101,
)
from solarian_agent.hw.feetech import protocol as P
from solarian_agent.hw.feetech.health import HealthMonitor
from solarian_agent.hw.feetech.protocol import STS3215
from solarian_agent.hw.feetech.simbus import SimulatedBus

BAUD = 1_000_000
N_SERVOS = 6


def _time(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _p(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def run(iterations: int = 500, loop_seconds: float = 1.0, quick: bool = False
        ) -> list[dict[str, Any]]:
    if quick:
        iterations, loop_seconds = min(iterations, 50), min(loop_seconds, 0.3)
    ids = list(range(1, N_SERVOS + 1))
    wire_pos = P.wire_time_s(P.sync_read_wire_bytes(N_SERVOS, 2), BAUD)
    wire_state = P.wire_time_s(P.sync_read_wire_bytes(N_SERVOS, STS3215.STATE_BLOCK_SIZE), BAUD)
    goal_frame = P.sync_write_packet(42, 2, {i: b"\x00\x08" for i in ids})
    wire_write = P.wire_time_s(len(goal_frame), BAUD)
    rows: list[dict[str, Any]] = []

    def row(name: str, value: float, unit: str, baseline: float | None) -> None:
        rows.append({"name": name, "value": round(value, 4), "unit": unit,
                     "baseline": None if baseline is None else round(baseline, 4)})

    with SimulatedBus(ids=ids) as sim:
        arm = FeetechArm(FeetechArmConfig(port=sim.port_name), calibration=default_so101())
        arm.connect()
        try:
            bus = arm.bus
            goals = {n: 0.0 for n in arm.joint_names}
            _time(lambda: bus.sync_read(56, 2, ids), 20)  # warm up
            pos = _time(lambda: bus.sync_read(56, 2, ids), iterations)
            state = _time(arm.read_state, iterations)
            write = _time(lambda: arm.write_goal(goals), iterations)
            ctl = ArmController(arm, SystemClock(), ArmControllerConfig(rate_hz=50.0,
                                                                        command_timeout_s=5.0))
            ctl.step()
            ctl.command({"shoulder_pan": 0.5})
            step = _time(ctl.step, iterations)

            ms = 1000.0
            row("sync_read 6 positions, mean", statistics.mean(pos) * ms, "ms", wire_pos * ms)
            row("sync_read 6 positions, p99", _p(pos, 0.99) * ms, "ms", wire_pos * ms)
            row("read_state 6 servos (11 B each), mean", statistics.mean(state) * ms, "ms",
                wire_state * ms)
            row("read_state 6 servos, p99", _p(state, 0.99) * ms, "ms", wire_state * ms)
            row("sync_write 6 goals, mean", statistics.mean(write) * ms, "ms", wire_write * ms)
            row("control step (read+clamp+write), mean", statistics.mean(step) * ms, "ms",
                (wire_state + wire_write) * ms)
            row("control step, p99", _p(step, 0.99) * ms, "ms", (wire_state + wire_write) * ms)
            row("max loop rate (1 / mean step)", 1.0 / statistics.mean(step), "Hz",
                1.0 / (wire_state + wire_write))

            health = HealthMonitor(read_current=arm.read_current_a)
            ctl_h = ArmController(arm, SystemClock(), ArmControllerConfig(
                rate_hz=50.0, command_timeout_s=5.0), health=health)
            ctl_h.step()
            ctl_h.command({"shoulder_pan": 0.5})
            step_h = _time(ctl_h.step, iterations)
            row("control step with health reads, mean", statistics.mean(step_h) * ms, "ms",
                statistics.mean(step) * ms)

            def loop_rate(with_health: bool) -> float:
                ctl2 = ArmController(arm, SystemClock(), ArmControllerConfig(rate_hz=50.0),
                                     health=HealthMonitor(read_current=arm.read_current_a)
                                     if with_health else None)
                stop = threading.Event()
                t = threading.Thread(target=ctl2.run, args=(stop,), daemon=True)
                t0 = time.perf_counter()
                t.start()
                stop.wait(loop_seconds)
                stop.set()
                t.join(timeout=2.0)
                return ctl2.steps / (time.perf_counter() - t0)

            plain = loop_rate(False)
            row("ArmController.run at 50 Hz, achieved", plain, "Hz", 50.0)
            row("ArmController.run at 50 Hz with health reads, achieved", loop_rate(True), "Hz",
                plain)
            row("bus faults during bench", float(bus.stats.faults), "count", 0.0)
        finally:
            arm.disconnect()
    return rows


def main() -> None:
    rows = run()
    w = max(len(r["name"]) for r in rows)
    print(f"{'benchmark':<{w}}  {'value':>10}  {'unit':<6}  {'baseline':>10}")
    for r in rows:
        b = "" if r["baseline"] is None else f"{r['baseline']:.4g}"
        print(f"{r['name']:<{w}}  {r['value']:>10.4g}  {r['unit']:<6}  {b:>10}")
    print("baseline: 1 Mbps wire time of the same frames (8N1), from their actual sizes; "
          "for the rows with health reads, the same figure without them (same run)")


if __name__ == "__main__":
    main()
