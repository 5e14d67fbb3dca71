"""``solarian-agent COMMAND``: demo | bench | chat | panel | eval-monitor | label-ticks |
make-ticks | view-episode | attach-logs | launch | bag-repair | arm | calibrate-camera.

Subcommands import their modules lazily, so ``--help`` is instant.  The conventions every
command keeps (:mod:`.cli_common`): ``--help`` on each, ``--log-level`` / ``-v`` on each (also
given before the command), a usage error is one line on stderr with exit status 2, Ctrl-C
exits 130 without a traceback, a missing optional extra names the pip line that installs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from .cli_common import CliParser, MissingExtraError, fail, install_hint, number_arg, version

PROG = "solarian-agent"


_positive_int = number_arg(int, lambda n: n >= 1, "a whole number >= 1")


def _bench(argv: Sequence[str]) -> int:
    if list(argv[:1]) == ["agent"]:  # one model's episodes: its own options
        from .benchmarks.agent_cli import main as bench_agent

        return bench_agent(argv[1:])
    from . import benchmarks

    p = CliParser(prog=f"{PROG} bench",
                  description="Run benchmarks: progress per suite on stderr, then a table "
                              "(at most 100 columns) or, with --json, the rows as JSON.")
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help=f"suites to run (default all): {', '.join(benchmarks.SUITES)}; "
                        "`bench agent --help`: one planner model's success, tokens, dollars")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (for CI smoke)")
    p.add_argument("--sim", choices=("2d", "mujoco", "all"), default="all",
                   help="simulator backends of the sim and tidy suites (default all: side by "
                        "side)")
    p.add_argument("--json", action="store_true",
                   help="print the rows as one JSON list (for scripts) instead of the table")
    p.add_argument("--jobs", type=_positive_int, default=1,
                   help="episodes run at once on that many processes (tidy suite; default 1)")
    a = p.parse_args(list(argv))
    unknown = [s for s in a.suites if s not in benchmarks.SUITES]
    if unknown:
        p.error(f"unknown suite {unknown[0]!r}; suites: {', '.join(benchmarks.SUITES)}")
    sims = ("2d", "mujoco") if a.sim == "all" else (a.sim,)

    def progress(line: str) -> None:
        print(f"bench {line}", file=sys.stderr, flush=True)

    rows = benchmarks.run(a.suites or None, quick=a.quick, sims=sims, progress=progress,
                          jobs=a.jobs)
    if a.json:
        import json

        print(json.dumps(rows, indent=1, default=str))
    else:
        print(benchmarks.format_table(rows))
    return 0


def _lazy(module: str, func: str) -> Callable[[Sequence[str]], int]:
    def run(argv: Sequence[str]) -> int:
        import importlib

        mod = importlib.import_module(module)
        return int(getattr(mod, func)(list(argv)) or 0)

    return run


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "demo": (_lazy("solarian_agent.demo", "main"),
             "tidy the simulated table end to end (offline by default)"),
    "bench": (_bench, "run the benchmarks and print a table"),
    "chat": (_lazy("solarian_agent.ros.front_ends", "main_chat"),
             "terminal chat with the agent (embedded robot, or --ros)"),
    "panel": (_lazy("solarian_agent.ros.front_ends", "main_panel"),
              "the operator panel (a web page) over the embedded robot, or --ros"),
    "eval-monitor": (_lazy("solarian_agent.monitor_eval", "main_eval"),
                     "evaluate monitor questions on labelled ticks"),
    "label-ticks": (_lazy("solarian_agent.monitor_label", "main_label"),
                    "label recorded monitor ticks"),
    "make-ticks": (_lazy("solarian_agent.monitor_record", "main_make_ticks"),
                   "record labelled monitor ticks from simulated episodes under faults"),
    "view-episode": (_lazy("solarian_agent.ui.viewer", "main_view_episode"),
                     "write an HTML viewer for an episode"),
    "attach-logs": (_lazy("solarian_agent.ui.attach_logs", "main_attach_logs"),
                    "copy controller logs in beside a robot recording"),
    "launch": (_lazy("solarian_agent.ros.launcher", "main_launch"),
               "start a launch file's nodes without ros2 launch (ROS 2 from PyPI)"),
    "bag-repair": (_lazy("solarian_agent.ros.bag_repair", "main_bag_repair"),
                   "recover a rosbag2 bag's unclosed last file and write its metadata"),
    "arm": (_lazy("solarian_agent.hw.feetech.cli", "main"),
            "first-day arm tools: find-port, setup-motors, ping, calibrate, import-lerobot, "
            "teleop"),
    "calibrate-camera": (_lazy("solarian_agent.hw.camera.calibrate_cli", "main"),
                         "calibrate a camera: intrinsics, then its pose relative to the arm"),
    "bringup": (_lazy("solarian_agent.bringup.cli", "main"),
                "guided first-day set-up: servos, calibration, cameras, poses, pointing check"),
    "doctor": (_lazy("solarian_agent.bringup.doctor", "main"), "check the robot, with fixes"),
}

GLOBAL_FLAGS = ("-v", "-vv", "-vvv", "--verbose")


def usage() -> str:
    lines = [f"usage: {PROG} [--version] [--log-level LEVEL] [-v] COMMAND [ARGS]", "",
             "commands:"]
    lines += [f"  {name:<17} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", f"{PROG} COMMAND --help shows a command's options.  Every command takes "
                  "--log-level\n(debug, info, warning, error) and -v (-vv: debug)."]
    return "\n".join(lines)


def split_global(args: list[str]) -> tuple[list[str], list[str]]:
    """Logging options given before the command -> (those, the rest)."""
    front: list[str] = []
    while args:
        a = args[0]
        if a in GLOBAL_FLAGS or a.startswith("--log-level="):
            front.append(args.pop(0))
        elif a == "--log-level" and len(args) > 1:
            front += [args.pop(0), args.pop(0)]
        else:
            break
    return front, args


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    front, args = split_global(args)
    if args and args[0] in ("-V", "--version"):
        print(f"{PROG} {version()}")
        return 0
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    cmd = COMMANDS.get(args[0])
    if cmd is None:
        return fail(PROG, f"error: unknown command {args[0]!r}; commands: "
                          f"{', '.join(COMMANDS)} (see --help)")
    try:
        return cmd[0]([*args[1:], *front])
    except KeyboardInterrupt:
        print(f"{PROG} {args[0]}: interrupted", file=sys.stderr)
        return 130
    except MissingExtraError as e:
        return fail(f"{PROG} {args[0]}", str(e))
    except ModuleNotFoundError as e:  # an optional extra the command imports
        if e.name and e.name.split(".")[0] in ("starlette", "uvicorn", "anthropic", "openai",
                                               "rclpy", "selenium"):
            return fail(f"{PROG} {args[0]}", install_hint(e.name, args[0]))
        raise


if __name__ == "__main__":
    raise SystemExit(main())
