"""``python -m solarian_agent.hw.feetech {ping,calibrate,teleop} [--port P | --sim]``.

Set-up tools for a real arm (see docs/hardware.md); ``--sim`` runs the same code against the
simulated servo bus on a pseudo-terminal.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Mapping
from contextlib import ExitStack

from solarian_agent.core.clock import SystemClock
from solarian_agent.hw.errors import HardwareError
from solarian_agent.hw.feetech.arm import DEFAULT_CALIBRATION, FeetechArm, FeetechArmConfig
from solarian_agent.hw.feetech.calibration import (
    ArmCalibration,
    default_so101,
    run_guided_calibration,
)
from solarian_agent.hw.feetech.controller import ArmController, ArmControllerConfig
from solarian_agent.hw.feetech.simbus import SimulatedBus


class TerminalUI:
    """Calibration UI on stdin/stdout: Enter confirms; the range step shows min/now/max and
    ends when Enter is pressed (checked without blocking between samples)."""

    def __init__(self) -> None:
        self._done = threading.Event()

    def instruct(self, step: str, message: str) -> None:
        print(f"\n[{step}] {message}", flush=True)
        if step == "range":
            self._done.clear()
            threading.Thread(target=self._wait_enter, daemon=True).start()

    def _wait_enter(self) -> None:
        sys.stdin.readline()
        self._done.set()

    def confirm(self, step: str) -> bool:
        try:
            return input("Press Enter to continue (q to abort): ").strip().lower() != "q"
        except EOFError:
            return False

    def progress(self, ranges: Mapping[str, tuple[int, int, int]]) -> bool:
        line = "  ".join(f"{n[:8]}:{lo}<{now}<{hi}" for n, (lo, now, hi) in ranges.items())
        print("\r" + line[:200], end="", flush=True)
        return not self._done.wait(0.05)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m solarian_agent.hw.feetech")
    ap.add_argument("command", choices=["ping", "calibrate", "teleop"])
    ap.add_argument("--port", help="serial port, e.g. /dev/serial/by-id/usb-1a86_...")
    ap.add_argument("--sim", action="store_true", help="use the simulated servo bus")
    ap.add_argument("--calibration", default=DEFAULT_CALIBRATION)
    ap.add_argument("--baudrate", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    with ExitStack() as stack:
        port = args.port
        if args.sim:
            port = stack.enter_context(SimulatedBus()).port_name
        if not port:
            try:
                port = FeetechArmConfig.from_yaml(args.calibration).port
            except Exception:
                ap.error("give --port (ls /dev/serial/by-id/) or --sim")
        cfg = FeetechArmConfig(port=port, baudrate=args.baudrate,
                               calibration_file=args.calibration)
        try:
            cal = None if not args.sim else default_so101()
            if args.command == "calibrate" and cal is None:
                try:
                    cal = ArmCalibration.load(args.calibration)
                except HardwareError:
                    cal = default_so101()
            arm = FeetechArm(cfg, calibration=cal)
            arm.connect()
            stack.callback(arm.disconnect)
            if args.command == "ping":
                for n in arm.joint_names:
                    arm.ping(n)
                    print(f"{n}: ok")
                print(arm.read_state().servos)
            elif args.command == "calibrate":
                new = run_guided_calibration(arm.read_raw_positions, TerminalUI(),
                                             base=arm.calibration, set_torque=arm.set_torque)
                out = args.calibration if not args.sim else "/dev/stdout"
                new.save(out, settings=None if not args.sim else {})
                print(f"\nsaved {out}")
            else:
                return _teleop(arm)
        except HardwareError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


def _teleop(arm: FeetechArm) -> int:
    from solarian_agent.hw.teleop import HELP, KeyboardTeleop, raw_terminal

    clock = SystemClock()
    ctl = ArmController(arm, clock, ArmControllerConfig(rate_hz=arm.config.rate_hz,
                                                        command_timeout_s=2.0))
    stop = threading.Event()
    loop = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
    loop.start()

    def show(kind: str, detail: dict[str, object]) -> None:
        r = ctl.latest
        pos = "" if r is None or r.state is None else "  ".join(
            f"{n[:6]}={v:+.2f}" for n, v in r.state.positions.items())
        print(f"\r{detail.get('action')}: {pos} {detail.get('error', '')}".ljust(120),
              end="", flush=True)

    print("Teleop keys:" + HELP)
    tele = KeyboardTeleop(ctl, arm.limits, show)
    try:
        with raw_terminal():
            tele.run(sys.stdin)
    finally:
        stop.set()
        loop.join(timeout=2.0)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
