"""The nodes of a launch plan as processes this process owns (ROS-free: only ``subprocess``).

``launch`` / ``launch_ros`` are not on PyPI, so where only PyPI's ROS 2 is installed the graph
is started from :mod:`.launch_plan` by :class:`NodeProcesses`: the same executables, names,
namespaces, parameters (as a ``--params-file``, typed as launch_ros passes them) and remappings
the launch files use, run as ``python -m solarian_agent.ros.<executable>`` -- what the wrapper
scripts CMake installs in ``lib/solarian_agent`` run.  Used by ``solarian-agent launch``, the
ROS benchmarks and the graph tests.

Every node is its own process group and is killed with its parent (``PR_SET_PDEATHSIG``);
:meth:`NodeProcesses.close` signals every node, waits (bounded), then kills what is left,
group by group, so no node outlives whoever started it.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

PKG_ROOT = Path(__file__).resolve().parents[2]  # the source tree (or site-packages)


DDS_PROFILE_VARS = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")


def dds_profile() -> Path:
    """The package's Fast DDS profile (config/fastdds.xml: camera frames fit shared memory)."""
    from .components import share_dir

    return share_dir() / "config" / "fastdds.xml"


def with_dds_profile(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the package's Fast DDS profile, unless one is set already or another RMW
    implementation is chosen."""
    rmw = env.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if rmw == "rmw_fastrtps_cpp" and not any(env.get(v) for v in DDS_PROFILE_VARS):
        profile = dds_profile()
        if profile.is_file():
            env["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(profile)
    return env


DOMAINS = range(1, 201)  # Fast DDS's port scheme leaves room for 0..232 on one host
_LEASES: dict[int, Any] = {}  # domain -> the open lock file that holds it


def free_domain() -> int:
    """A DDS domain no other process on this host holds: graphs of concurrent test runs (other
    checkouts, other users) never see each other's nodes.  Held by an exclusive ``flock`` on
    ``$TMPDIR/solarian-ros-domain-<N>.lock`` until :func:`release_domain` or this process ends
    (the kernel drops the lock with the process, however it ends)."""
    import fcntl
    import tempfile

    order = list(DOMAINS)
    random.SystemRandom().shuffle(order)
    for d in order:
        if d in _LEASES:
            continue
        f = open(Path(tempfile.gettempdir()) / f"solarian-ros-domain-{d}.lock", "a")  # noqa: SIM115
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _LEASES[d] = f
        return d
    raise RuntimeError(f"no free ROS domain among {DOMAINS.start}..{DOMAINS.stop - 1}")


def release_domain(domain: int | None) -> None:
    f = _LEASES.pop(domain, None) if domain is not None else None
    if f is not None:
        f.close()  # closing the file drops the lock


def _die_with_parent() -> None:
    # runs in the child between fork and exec: SIGKILL it when its parent dies
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Proc:
    def __init__(self, name: str, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.popen = popen
        self.log = log

    def output(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait_for_output(self, text: str, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if text in self.output():
                return True
            if self.popen.poll() is not None:
                return text in self.output()
            time.sleep(0.05)
        return text in self.output()

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill_group(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.popen.wait(5.0)
        except subprocess.TimeoutExpired:
            pass


class NodeProcesses:
    """The nodes of one graph, as processes in their own process groups."""

    def __init__(self, workdir: Path, domain: int | None = None, namespace: str = "",
                 own_domain: bool = True, log_to_files: bool = True) -> None:
        """``own_domain``: a fresh ``ROS_DOMAIN_ID`` for this graph (tests, benchmarks) unless
        ``domain`` is given; False keeps the caller's environment (the launcher).
        ``log_to_files``: each node's output to ``<workdir>/<node>.log``; False: inherited."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.domain = domain if domain is not None else (free_domain() if own_domain else None)
        self.own_domain = own_domain
        self.log_to_files = log_to_files
        self.namespace = namespace
        self.procs: dict[str, Proc] = {}

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "ROS_LOG_DIR": str(self.workdir / "ros_log"),
            "PYTHONUNBUFFERED": "1",
            "RCUTILS_LOGGING_BUFFERED_STREAM": "0",
            "RCUTILS_COLORIZED_OUTPUT": "0",
            # the nodes import this very package (the source tree when run from a checkout)
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(PKG_ROOT), env.get("PYTHONPATH", "")) if p),
        })
        if self.domain is not None:
            env["ROS_DOMAIN_ID"] = str(self.domain)
        if self.own_domain:  # a graph of its own: kept off the network too
            env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        return with_dds_profile(env)

    def command(self, executable: str, name: str, parameters: Mapping[str, Any],
                remappings: Sequence[tuple[str, str]] = (), namespace: str | None = None,
                ros_args: Sequence[str] = ()) -> list[str]:
        """The command line ``ros2 run`` / launch_ros would give the installed executable:
        node name, namespace, a parameter file, remappings."""
        ns = self.namespace if namespace is None else namespace
        cmd = [sys.executable, "-m", f"solarian_agent.ros.{executable}", "--ros-args",
               "-r", f"__node:={name}"]
        if ns.strip("/"):
            cmd += ["-r", f"__ns:=/{ns.strip('/')}"]
        if parameters:
            path = self.workdir / f"{ns.strip('/').replace('/', '.')}.{name}.params.yaml"
            path.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(parameters)}}),
                            encoding="utf-8")
            cmd += ["--params-file", str(path)]
        for a, b in remappings:
            cmd += ["-r", f"{a}:={b}"]
        return cmd + list(ros_args)

    def start(self, executable: str, name: str, parameters: Mapping[str, Any] | None = None,
              remappings: Sequence[tuple[str, str]] = (), namespace: str | None = None,
              ros_args: Sequence[str] = ()) -> Proc:
        ns = (self.namespace if namespace is None else namespace).strip("/")
        key = f"{ns}/{name}" if ns else name  # the node's name in the graph, without the "/"
        if key in self.procs and self.procs[key].returncode is None:
            raise RuntimeError(f"node {key} is already running")
        cmd = self.command(executable, name, parameters or {}, remappings, namespace,
                           ros_args)
        log = self.workdir / f"{key.replace('/', '.')}.log"
        if self.log_to_files:
            with open(log, "wb") as out:
                popen = subprocess.Popen(cmd, cwd=self.workdir, env=self.env(), stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        else:
            popen = subprocess.Popen(cmd, env=self.env(), stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        proc = Proc(key, popen, log)
        self.procs[key] = proc
        return proc

    def start_plan(self, plan: Sequence[Any], overrides: Mapping[str, Mapping[str, Any]]
                   | None = None) -> list[Proc]:
        """Start the package's nodes of a launch plan (other packages' nodes and processes,
        robot_state_publisher / rviz / ros2 bag, are not on PyPI and are left out)."""
        from .launch_plan import PKG

        out = []
        for p in plan:
            if p.cmd or p.package != PKG:
                continue
            params = {**p.parameters, **(overrides or {}).get(p.name, {})}
            out.append(self.start(p.executable, p.name, params, p.remappings))
        return out

    def stop(self, name: str, sig: int = signal.SIGINT, timeout_s: float = 20.0) -> int | None:
        """Signal one node (``name``: ``ns/node`` or ``node``) and wait for it to exit; its exit
        code (None: it did not exit)."""
        proc = self.procs[name]
        proc.signal(sig)
        return proc.wait(timeout_s)

    def close(self, timeout_s: float = 15.0) -> dict[str, int | None]:
        """SIGINT every node still running, wait, then kill what is left, group by group."""
        for p in self.procs.values():
            try:
                p.signal(signal.SIGINT)
            except ProcessLookupError:
                pass
        end = time.monotonic() + timeout_s
        codes: dict[str, int | None] = {}
        for name, p in self.procs.items():
            codes[name] = p.wait(max(0.1, end - time.monotonic()))
        for p in self.procs.values():
            p.kill_group()
        if self.own_domain:
            release_domain(self.domain)  # the graph is gone: another one may use it
        return codes

    def outputs(self, tail: int = 3000, only: Sequence[str] | None = None) -> str:
        return "\n".join(f"----- {n} (exit {p.returncode}) -----\n{p.output()[-tail:]}"
                         for n, p in self.procs.items() if only is None or n in only)

    def exit_problems(self, codes: Mapping[str, int | None]) -> str:
        """The nodes that did not exit 0, each with its output's end (for an assertion)."""
        bad = [n for n, c in codes.items() if c != 0]
        hung = [n for n in bad if codes[n] is None]
        return (f"exit codes {dict(codes)}; not 0: {bad}"
                + (f" (still running at the deadline, killed: {hung})" if hung else "") + "\n"
                + self.outputs(6000, only=bad))


__all__ = ["DDS_PROFILE_VARS", "NodeProcesses", "Proc", "dds_profile", "free_domain",
           "release_domain", "with_dds_profile"]
