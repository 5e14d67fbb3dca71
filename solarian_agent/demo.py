"""``solarian-agent demo``: tidy the simulated table end to end in one process.

Offline by default (the ``rules`` planner and the ``cv`` monitor read the rendered images, never
the simulator's truth).  Prints progress a person can follow (every question the planner asks
the user and every final summary), writes the episode log, records a rosbag2 file, and judges
the task it was given: the goal as read by :func:`~solarian_agent.models.task_reading.read_task`
(the planner's reading) is checked by a final, fresh ``verify_state`` and by the simulator's
truth (:mod:`solarian_agent.task_check`).  Exits 0 only when both say that goal holds; 2 for
a usage error (an empty or command-only task, a bad ``--seed``, ``--faults`` or ``--timeout``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cli_common import CliParser, number_arg
from .core import names
from .core.errors import ConfigError, CoreError
from .core.event_text import progress_line
from .core.messages import AgentEvent
from .core.model_api import ModelConfigError
from .core.text import for_terminal
from .core.transport import QoS
from .models.task_reading import TaskReading, label, read_task
from .sim.backend import DEFAULT_BACKEND, SIM_BACKENDS

DEFAULT_TASK = ("put the red cup on the tray and the yellow paper in the bin, then check the "
                "table")


class Printer:
    """Turns agent events into lines a person can follow."""

    def __init__(self, out: Any = None, verbose: bool = False) -> None:
        self.out = out  # None: whatever sys.stdout is when a line is printed
        self.verbose = verbose

    def __call__(self, ev: AgentEvent) -> None:
        line = progress_line(ev.typed(), self.verbose)
        if line:  # one event, one line: whatever a model or a skill said, escaped
            print(for_terminal(line), file=self.out or sys.stdout, flush=True)


def _free_dir(path: Path) -> Path:
    n = 1
    out = path
    while out.exists():
        n += 1
        out = path.with_name(f"{path.name}_{n}")
    return out


_seed = number_arg(int, lambda v: 0 <= v < 2**32, "a whole number",
                   f"between 0 and {2**32 - 1}")
_probability = number_arg(float, lambda v: 0.0 <= v <= 1.0, "a number",
                          "a probability from 0 to 1")
_seconds = number_arg(float, lambda v: 0.0 < v < 1e7, "a number of seconds",
                      "more than 0 s (and finite)")


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = CliParser(prog="solarian-agent demo", description=__doc__)
    p.add_argument("task", nargs="?", default=DEFAULT_TASK,
                   help=f"what to ask the agent (default: {DEFAULT_TASK!r})")
    p.add_argument("--seed", type=_seed, default=7, help="table layout and fault seed")
    p.add_argument("--sim", choices=SIM_BACKENDS, default=DEFAULT_BACKEND,
                   help="simulator: 2d (the tabletop world, default) or mujoco (3D physics)")
    p.add_argument("--pick", choices=("scripted", "policy"), default="scripted",
                   help="pick_object: the scripted pick (default) or the learned pick policy "
                        "(config/skills/pick_policy.yaml)")
    p.add_argument("--faults", type=_probability, default=0.0, metavar="P",
                   help="probability of a (recoverable) failed grasp or slip per attempt")
    p.add_argument("--planner", default=None,
                   help="planner provider: rules (default), anthropic, openai")
    p.add_argument("--monitor", default=None, help="monitor provider: cv (default), none, ...")
    p.add_argument("--config", type=Path, default=None, help="controller.yaml to use")
    p.add_argument("--out", type=Path, default=Path("recordings") / "controller",
                   help="where episode logs go (default ./recordings/controller)")
    p.add_argument("--record", dest="record", action="store_true", default=True,
                   help="record a rosbag2 file of the run (default on)")
    p.add_argument("--no-record", dest="record", action="store_false",
                   help="record no rosbag2 file")
    p.add_argument("--realtime", action="store_true", help="pace the simulation in real time")
    p.add_argument("--timeout", type=_seconds, default=600.0, help="simulated seconds allowed")
    a = p.parse_args(list(argv))
    if not a.task.strip():
        p.error("the task is empty: say what to do, for example "
                f"{DEFAULT_TASK!r}")
    if a.task.strip() in ("/cancel", "/reset"):
        p.error(f"{a.task.strip()} is a command for a running agent, not a task: say what to "
                "do, for example " f"{DEFAULT_TASK!r}")
    return a


def main(argv: Sequence[str] = ()) -> int:
    a = _parse(argv)
    from .core.episode_log import session_name
    from .sim.faults import FaultConfig
    from .system import build_sim_system, load_config
    from .task_check import final_check, judge

    try:
        cfg = load_config(a.config)
        if a.monitor == "none":
            from dataclasses import replace

            cfg = replace(cfg, monitor=None)
        elif a.monitor:
            from dataclasses import replace

            assert cfg.monitor is not None
            cfg = replace(cfg, monitor=replace(cfg.monitor, provider=a.monitor))
        faults = FaultConfig(grasp_fail_p=a.faults, slip_p=a.faults / 2) if a.faults else None
        system = build_sim_system(config=cfg, seed=a.seed, faults=faults,
                                  planner_name=a.planner, log_root=a.out,
                                  session=session_name(f"demo {a.task}"),
                                  realtime=a.realtime or (a.planner not in (None, "rules")),
                                  sim_backend=a.sim, pick=a.pick)
    except (ConfigError, ModelConfigError) as e:
        print(f"solarian-agent demo: {e}", file=sys.stderr)
        return 2
    except CoreError as e:  # the simulator could not start (no OpenGL for mujoco)
        print(f"solarian-agent demo: the {a.sim} simulator cannot start: {e}", file=sys.stderr)
        return 1
    printer = Printer(verbose=a.verbose)
    system.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=printer,
                         qos=QoS(depth=500))
    bag = None
    if a.record:
        from .rosmsg.bag import BagRecorder

        # the run's episode is opened now (the run then logs in it) so its bag lies beside its
        # logs, where the episode viewer looks: <session>/episodes/<episode>/rosbag
        if system.recorder is not None:
            system.planner.log = system.recorder.open_episode(a.task)  # the run's, when it starts
            base = system.planner.log.dir.parent
        else:
            base = a.out / session_name(f"demo {a.task}")
        bag_dir = _free_dir(base / "rosbag")
        bag_dir.parent.mkdir(parents=True, exist_ok=True)
        clock = system.clock
        bag = BagRecorder(bag_dir, clock=lambda: int(clock.epoch() * 1e9),
                          realtime=system.runtime.realtime)
        bag.attach(system.bus)
    print(f"tidy-up demo ({a.sim} simulator): seed {a.seed}, faults {a.faults:g}, "
          f"{a.pick} pick, planner "
          f"{system.planner.provider.name}, monitor "
          f"{cfg.monitor.provider if cfg.monitor and system.monitor else 'none'}", flush=True)
    reading = read_task(a.task)
    print("goal as read: " + _describe(reading), flush=True)
    start = system.world.truth()
    system.planner.message(a.task)
    finished = system.run_until(
        lambda: system.planner.status not in ("idle", "running", "paused"), a.timeout)
    status = system.planner.status
    check = final_check(system)
    ep_dir = system.planner.log.dir if system.planner.log is not None else None
    if bag is not None:
        bag.close()
    end = system.world.truth()
    system.shutdown()
    verdict = judge(reading, start, end, check)
    print(f"final fresh verify_state: {json.dumps(check.get('report', check))}, held: "
          f"{check.get('held')}, arm at home: {check.get('arm_at_home')}")
    print("  " + "; ".join(verdict.verify_lines))
    print("simulator truth (for the record, not used by the agent): "
          + "; ".join(verdict.truth_lines))
    if ep_dir is not None:
        print(f"episode log: {ep_dir}")
        if bag is not None:
            print(f"rosbag: {bag.path}")
    if not finished:
        print(f"FAILED: the run did not end within {a.timeout:g} s (status {status})")
        return 1
    if status == "waiting_user":
        print("FAILED: the planner asked a question (above) and waits for an answer")
        return 1
    if not verdict.holds:
        who = ("the fresh verify_state" if not verdict.verified else "") + (
            " and " if not verdict.verified and not verdict.truth else "") + (
            "the simulator's truth" if not verdict.truth else "")
        says = "say" if not verdict.verified and not verdict.truth else "says"
        print(f"FAILED: the goal does not hold ({who} {says} so; the run {status})")
        return 1
    print(f"OK: the goal holds ({_describe(reading)}); the run {status}")
    return 0


def _describe(reading: TaskReading) -> str:
    parts = [f"{label(o)} {'on the tray' if d == 'tray' else 'in the ' + d}"
             for o, d in reading.goals]
    parts += [f"{label(o)} left as it is" for o in reading.kept()]
    parts += [f"question: {q}" for q in reading.questions]
    parts += [f"cannot: {q}" for q in reading.impossible]
    return "; ".join(parts) or "(nothing understood)"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

