"""``solarian-agent attach-logs <robot session dir>``: copy the controller's episode logs in
beside the robot's recording of the same session, so each episode's logs travel with its
recording.

    recordings/controller/<session>/episodes/<episode>/logs
        -> recordings/robot/<session>/episodes/<episode>/logs

The robot's session has the same directory name as the controller's.  Only episodes the robot
recorded get logs; an episode already holding identical logs is left alone; one holding
different logs is a conflict, reported and left alone unless ``--force`` (which copies the
controller's files over, keeping any others).  Each new ``logs/`` appears whole or not at all
(copied to a temporary name, then renamed).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cli_common import CliParser


@dataclass
class AttachReport:
    attached: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    no_robot_episode: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts


def controller_session_for(robot_session: Path, controller: Path | None = None) -> Path:
    """The controller's session dir: ``--controller`` (a session dir, or a root holding it),
    else ``<recordings>/controller/<session>`` beside ``<recordings>/robot/<session>``."""
    name = robot_session.resolve().name
    if controller is not None:
        controller = Path(controller)
        if (controller / "episodes").is_dir():
            return controller
        return controller / name
    return robot_session.resolve().parent.parent / "controller" / name


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def _differences(src: Path, dst: Path) -> list[str]:
    """Files of ``src`` that ``dst`` lacks or holds with other contents."""
    out = []
    for rel in _files(src):
        d = dst / rel
        if not d.is_file() or not filecmp.cmp(src / rel, d, shallow=False):
            out.append(str(rel))
    return out


def _copy_whole(src: Path, dst: Path) -> None:
    tmp = dst.with_name(dst.name + ".attach-tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("*.tmp"))
    os.replace(tmp, dst)


def attach_logs(robot_session: Path, controller: Path | None = None, *, force: bool = False,
                dry_run: bool = False) -> AttachReport:
    robot_session = Path(robot_session)
    if not (robot_session / "episodes").is_dir():
        raise FileNotFoundError(f"{robot_session} is not a recorded session (no episodes/)")
    ctrl = controller_session_for(robot_session, controller)
    if not (ctrl / "episodes").is_dir():
        raise FileNotFoundError(f"no controller recording of session {robot_session.name!r} "
                                f"at {ctrl} (use --controller)")
    rep = AttachReport()
    for ep in sorted(p for p in (ctrl / "episodes").iterdir() if p.is_dir()):
        src = ep / "logs"
        if not (src / "events.jsonl").is_file():
            continue
        robot_ep = robot_session / "episodes" / ep.name
        if not robot_ep.is_dir():
            rep.no_robot_episode.append(ep.name)
            continue
        dst = robot_ep / "logs"
        if not dst.exists():
            if not dry_run:
                _copy_whole(src, dst)
            rep.attached.append(ep.name)
            continue
        diff = _differences(src, dst)
        if not diff:
            rep.unchanged.append(ep.name)
        elif force:
            if not dry_run:
                for rel in diff:
                    (dst / rel).parent.mkdir(parents=True, exist_ok=True)
                    tmp = (dst / rel).with_name((dst / rel).name + ".attach-tmp")
                    shutil.copy2(src / rel, tmp)
                    os.replace(tmp, dst / rel)
            rep.updated.append(ep.name)
        else:
            rep.conflicts.append(f"{ep.name} ({len(diff)} files differ, e.g. {diff[0]})")
    return rep


def main_attach_logs(argv: Sequence[str] | None = None) -> int:
    p = CliParser(
        prog="solarian-agent attach-logs",
        description="Copy the controller's episode logs in beside the robot's recording of the "
                    "same session: recordings/controller/<session>/episodes/<ep>/logs -> "
                    "recordings/robot/<session>/episodes/<ep>/logs.")
    p.add_argument("session", type=Path, help="the robot's session dir, e.g. "
                                              "recordings/robot/0003_7f3a9c_cup_stacking")
    p.add_argument("--controller", type=Path, default=None,
                   help="the controller's session dir or recordings root (default: "
                        "../../controller/<session> from the robot session)")
    p.add_argument("--force", action="store_true",
                   help="overwrite logs that differ from the controller's")
    p.add_argument("-n", "--dry-run", action="store_true", help="say what would be copied")
    a = p.parse_args(list(argv) if argv is not None else None)
    try:
        rep = attach_logs(a.session, a.controller, force=a.force, dry_run=a.dry_run)
    except (FileNotFoundError, NotADirectoryError) as e:
        print(f"attach-logs: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"attach-logs: copying failed: {e}", file=sys.stderr)
        return 1
    verb = "would attach" if a.dry_run else "attached"
    for name in rep.attached:
        print(f"{verb} logs to episode {name}")
    for name in rep.updated:
        print(f"{'would update' if a.dry_run else 'updated'} logs of episode {name}")
    for name in rep.unchanged:
        print(f"episode {name}: logs already attached")
    for name in rep.no_robot_episode:
        print(f"episode {name}: the robot did not record it; skipped", file=sys.stderr)
    for c in rep.conflicts:
        print(f"episode {c}: its logs differ from the controller's; left alone (--force to "
              "overwrite)", file=sys.stderr)
    print(f"{len(rep.attached)} attached, {len(rep.updated)} updated, {len(rep.unchanged)} "
          f"already there, {len(rep.no_robot_episode)} not recorded by the robot, "
          f"{len(rep.conflicts)} conflicts")
    return 0 if rep.ok else 1
