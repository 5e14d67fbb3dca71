"""``solarian-agent doctor``: check a configured robot against its profile, in seconds.

    solarian-agent doctor [--profile PATH] [--json] [--timeout-s S]

One line per check: its status (ok / warn / fail), what it found, and for anything wrong the
command that fixes it.  The checks (docs/hardware.md, "Check the robot: doctor"):

- the profile: it loads, which bring-up steps are missing, the pointing check (ready, its
  figures, its age);
- the arm (:mod:`.doctor_arm`): the calibration file and its ranges; the servo port opens;
  every joint's servo answers as an STS3215; the EEPROM settings; the supply voltage; the
  servos' homing offsets equal the calibration file's (it is this arm's calibration);
- each camera (:mod:`.doctor_checks`): it opens and delivers a frame at the profile's size;
  its calibration file has intrinsics at that size and a pose in its mount's frame;
- ROS: rclpy imports, ``ROS_DOMAIN_ID`` / ``RMW_IMPLEMENTATION`` when set.

Exit status 0 when nothing would stop a task (warnings allowed), 1 when a check fails (a
missing or invalid profile is one line naming the file and ``solarian-agent bringup``), 2 for a
usage error.

The arm, each camera and ROS are checked at the same time, each on its own thread, and the
whole run is bounded (:func:`run_checks`): a camera whose driver hangs in its open becomes a
failure line when the time is up, and the other checks still report.  Every device wait inside
has its own timeout as well (a servo's answer, a camera's frame).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from solarian_agent.bringup.doctor_arm import arm_findings
from solarian_agent.bringup.doctor_checks import (
    Importer,
    camera_findings,
    profile_findings,
    ros_findings,
)
from solarian_agent.bringup.findings import PROG, Finding, Status, bringup, fail, one_line
from solarian_agent.bringup.profile import RobotProfile, default_profile_path
from solarian_agent.cli_common import CliParser, number_arg
from solarian_agent.core.errors import ConfigError

DEFAULT_TIMEOUT_S = 5.0
# A servo answers within a millisecond; 0.1 s is a hundred times that, and with one retry six
# silent servos cost 1.2 s in all.
SERVO_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class Check:
    """A named group of checks: ``run`` returns its findings (the name labels a failure of
    the group itself: it raised, or it did not finish in time)."""

    name: str
    run: Callable[[], list[Finding]]


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """Nothing would stop a task: no failure (warnings allowed)."""
        return all(f.status is not Status.FAIL for f in self.findings)

    def to_mapping(self) -> dict[str, object]:
        return {"ok": self.ok, "findings": [f.to_mapping() for f in self.findings]}

    def lines(self) -> list[str]:
        width = max((len(f.check) for f in self.findings), default=0)
        out = []
        for f in self.findings:
            fix = f"  fix: {f.fix}" if f.fix and f.status is not Status.OK else ""
            out.append(f"{f.status.value:<4}  {f.check:<{width}}  {f.detail}{fix}")
        return out

    def summary(self) -> str:
        n = {s: sum(f.status is s for f in self.findings) for s in Status}
        counts = ", ".join(f"{n[s]} {s.value}" for s in Status)
        verdict = "nothing stops a task" if self.ok else "fix the failures before a task"
        return f"{counts}: {verdict}"


def guarded(name: str, fn: Callable[[], list[Finding]]) -> list[Finding]:
    """``fn``'s findings; an exception becomes a failure naming it (no check's bug may hide
    the others' findings)."""
    try:
        return list(fn())
    except Exception as e:
        return [fail(name, f"the check raised {type(e).__name__}: {one_line(e)}")]


def run_checks(checks: Sequence[Check], deadline_s: float) -> list[Finding]:
    """Every check on its own daemon thread, all at once; the findings in the checks' order.
    A check still running ``deadline_s`` after the start is reported as a failure and left
    behind (a daemon thread: it ends with the process, and killing a thread inside a device
    driver is not safe)."""
    results: list[list[Finding] | None] = [None] * len(checks)

    def work(i: int, check: Check) -> None:
        results[i] = guarded(check.name, check.run)

    threads = [threading.Thread(target=work, args=(i, c), name=f"doctor-{c.name}", daemon=True)
               for i, c in enumerate(checks)]
    end = time.monotonic() + deadline_s
    for t in threads:
        t.start()
    out: list[Finding] = []
    for t, check, i in zip(threads, checks, range(len(checks)), strict=True):
        t.join(max(0.0, end - time.monotonic()))
        got = results[i]
        if t.is_alive() or got is None:
            out.append(fail(check.name, f"did not finish within {deadline_s:g} s (a device "
                            "that hangs?)", f"unplug and replug it, then run {PROG} doctor "
                            "again"))
        else:
            out.extend(got)
    return out


def diagnose(path: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
             env: Mapping[str, str] | None = None,
             import_module: Importer = importlib.import_module,
             now: _dt.datetime | None = None) -> Report:
    """Every check of the robot the profile at ``path`` describes."""
    if not path.is_file():
        return Report((fail("profile", f"no robot profile at {path}", bringup()),))
    try:
        profile = RobotProfile.load(path)
    except (ConfigError, OSError) as e:
        return Report((fail("profile", f"{path} is not a valid robot profile: "
                            f"{one_line(_reason(e, path))}", bringup()),))
    checks = [Check("profile", partial(profile_findings, profile, now)),
              Check("arm", partial(arm_findings, profile, guarded, SERVO_TIMEOUT_S))]
    checks += [Check(f"camera {c.name}", partial(camera_findings, c, timeout_s))
               for c in profile.cameras]
    checks.append(Check("ROS", partial(ros_findings, dict(os.environ if env is None else env),
                                       import_module)))
    return Report(tuple(run_checks(checks, deadline_s=2 * timeout_s + 5.0)))


def _reason(e: Exception, path: Path) -> str:
    """A ConfigError's message without the file name in front (the line names it)."""
    text = str(e)
    for prefix in (f"{path}: ", f"{path}:"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


# ------------------------------------------------------------------------------ the command
_seconds = number_arg(float, lambda v: 0 < v <= 600, "a number of seconds",
                      "a number of seconds in (0, 600]")


def _parser() -> CliParser:
    p = CliParser(prog=f"{PROG} doctor",
                  description="Check a configured robot against its profile: the arm's servos, "
                              "calibration and supply, the cameras and their calibrations, the "
                              "pointing check and ROS. One line per check with the command that "
                              "fixes what is wrong. Exit status 0: nothing stops a task "
                              "(warnings allowed); 1: a check failed; 2: a usage error.")
    p.add_argument("--profile", type=Path, default=None, metavar="PATH",
                   help=f"the robot profile (default {default_profile_path()}, or "
                        "$SOLARIAN_ROBOT_PROFILE)")
    p.add_argument("--json", action="store_true",
                   help='print {"ok": ..., "findings": [{"check", "status", "detail", '
                        '"fix"}, ...]} instead of the lines')
    p.add_argument("--timeout-s", type=_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help="how long a camera may take to deliver its first frame; the whole run "
                        f"ends within 2 S + 5 s (default {DEFAULT_TIMEOUT_S:g})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from solarian_agent.core.text import for_terminal

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    path = Path(args.profile).expanduser() if args.profile else default_profile_path()
    report = diagnose(path, args.timeout_s)
    if args.json:
        print(json.dumps(report.to_mapping(), indent=1, ensure_ascii=False))
    else:
        for line in report.lines():
            print(for_terminal(line))
        if len(report.findings) > 1:
            print(report.summary())
    return 0 if report.ok else 1


__all__ = ["DEFAULT_TIMEOUT_S", "Check", "Report", "diagnose", "guarded", "main", "run_checks"]
