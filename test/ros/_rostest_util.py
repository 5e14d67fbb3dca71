"""Real-rclpy test helpers: the graph's nodes as processes the test owns, and a test-side
probe node.

:class:`NodeProcesses` starts what :mod:`solarian_agent.ros.launch_plan` describes (the same
executables, parameters, names, namespaces and remappings the launch files use; ``launch`` is
not on PyPI) as ``python -m solarian_agent.ros.<executable>`` processes -- what the wrapper
scripts CMake installs in ``lib/solarian_agent`` run.  Every process is its own process group
and is killed with its parent (``PR_SET_PDEATHSIG``), and :meth:`NodeProcesses.close` reaps
the groups whatever happened, so no node outlives its test (a leaked skills node would double
the ``skills/*`` action servers of the next test).  Each graph gets its own ``ROS_DOMAIN_ID``
and discovery stays on this host.

:class:`Probe` is the test's own node on its own rclpy context (same domain), spun on a thread;
every wait has a timeout.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / "build" / "ros" / "install"


def ros_required() -> bool:
    """Under CI (or ``make test``) a missing or broken ROS set-up fails, never skips."""
    return (os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
            or os.environ.get("SOLARIAN_REQUIRE_ROS") == "1")


def prepare_environment() -> None:
    """Before rclpy initialises: the package's interfaces on AMENT_PREFIX_PATH (``make ros``
    builds them into build/ros/install) and discovery kept on this host."""
    parts = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for p in (str(PREFIX), sys.prefix):
        if p not in parts:
            parts.append(p)
    os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(parts)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ["RCUTILS_COLORIZED_OUTPUT"] = "0"


def ros_problem() -> str | None:
    """Why real rclpy and the package's interfaces cannot be used here (None: they can)."""
    prepare_environment()
    try:
        import rclpy  # noqa: F401

        from solarian_agent.ros.ros_types import interface_class

        interface_class("solarian_agent/action/Skill")
        interface_class("solarian_agent/msg/AgentState")
    except Exception as e:
        return (f"real rclpy or the package's interfaces do not import: {type(e).__name__}: "
                f"{e} (run `make ros`)")
    return None


def free_domain() -> int:
    """A DDS domain for one graph (tests of other checkouts may run at the same time)."""
    return random.SystemRandom().randint(1, 200)


def _die_with_parent() -> None:
    # runs in the child between fork and exec: SIGKILL it when the test process dies
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

    def __init__(self, workdir: Path, domain: int | None = None, namespace: str = "") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.domain = domain if domain is not None else free_domain()
        self.namespace = namespace
        self.procs: dict[str, Proc] = {}

    def env(self) -> dict[str, str]:
        prepare_environment()
        env = dict(os.environ)
        env.update({
            "ROS_DOMAIN_ID": str(self.domain),
            "ROS_LOG_DIR": str(self.workdir / "ros_log"),
            "PYTHONUNBUFFERED": "1",
            "RCUTILS_LOGGING_BUFFERED_STREAM": "0",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        })
        return env

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
        with open(log, "wb") as out:
            popen = subprocess.Popen(cmd, cwd=self.workdir, env=self.env(), stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        proc = Proc(key, popen, log)
        self.procs[key] = proc
        return proc

    def start_plan(self, plan: Sequence[Any], overrides: Mapping[str, Mapping[str, Any]]
                   | None = None) -> list[Proc]:
        """Start the package's nodes of a launch plan (other packages' nodes and processes,
        robot_state_publisher / rviz / ros2 bag, are not on PyPI and are left out)."""
        from solarian_agent.ros.launch_plan import PKG

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
        return codes

    def outputs(self, tail: int = 3000) -> str:
        return "\n".join(f"----- {n} (exit {p.returncode}) -----\n{p.output()[-tail:]}"
                         for n, p in self.procs.items())


# ------------------------------------------------------------------------------------------
# the test's own node
# ------------------------------------------------------------------------------------------
def qos(name: str) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    if name == "sensor":
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                          reliability=ReliabilityPolicy.BEST_EFFORT,
                          durability=DurabilityPolicy.VOLATILE)
    if name == "latched":
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                          reliability=ReliabilityPolicy.RELIABLE,
                          durability=DurabilityPolicy.TRANSIENT_LOCAL)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def ros_type(name: str) -> Any:
    from solarian_agent.ros.ros_types import interface_class

    return interface_class(name)


class Probe:
    """The test's node, on its own context in the graph's domain."""

    def __init__(self, domain: int, name: str = "test_probe", namespace: str = "") -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.node import Node

        prepare_environment()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = Node(name, namespace=namespace or None, context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, name="probe-spin",
                                       daemon=True)
        self.thread.start()
        self._subs: dict[tuple[str, str], Any] = {}

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self.thread.join(5.0)

    # topics --------------------------------------------------------------------------------
    def listen(self, typename: str, topic: str, qos_name: str = "reliable") -> list[Any]:
        """Every message on ``topic`` from now on (a list the subscription appends to)."""
        key = (topic, qos_name)
        if key not in self._subs:
            got: list[Any] = []
            sub = self.node.create_subscription(ros_type(typename), topic, got.append,
                                                qos(qos_name))
            self._subs[key] = (sub, got)
        return self._subs[key][1]  # type: ignore[no-any-return]

    def messages(self, typename: str, topic: str, qos_name: str = "reliable", count: int = 1,
                 timeout_s: float = 30.0) -> list[Any]:
        got: list[Any] = []
        done = threading.Event()

        def cb(m: Any) -> None:
            got.append(m)
            if len(got) >= count:
                done.set()

        sub = self.node.create_subscription(ros_type(typename), topic, cb, qos(qos_name))
        try:
            done.wait(timeout_s)
        finally:
            self.node.destroy_subscription(sub)
        return got[:count]  # callbacks run on several threads: one more may have come in

    def publisher(self, typename: str, topic: str, qos_name: str = "reliable") -> Any:
        pub = self.node.create_publisher(ros_type(typename), topic, qos(qos_name))
        return pub

    # services ------------------------------------------------------------------------------
    def call(self, typename: str, name: str, timeout_s: float = 30.0, **fields: Any) -> Any:
        cls = ros_type(typename)
        client = self.node.create_client(cls, name)
        try:
            assert client.wait_for_service(timeout_sec=timeout_s), f"no service {name}"
            done = threading.Event()
            fut = client.call_async(cls.Request(**fields))
            fut.add_done_callback(lambda _f: done.set())
            assert done.wait(timeout_s), f"{name} did not answer within {timeout_s} s"
            return fut.result()
        finally:
            self.node.destroy_client(client)

    # actions -------------------------------------------------------------------------------
    def action_client(self, name: str, timeout_s: float = 30.0) -> Any:
        from rclpy.action import ActionClient

        client = ActionClient(self.node, ros_type("solarian_agent/action/Skill"), name)
        assert client.wait_for_server(timeout_sec=timeout_s), f"no action server {name}"
        return client

    def goal(self, tool: str, params: str, generation: int, action_id: str) -> Any:
        return ros_type("solarian_agent/action/Skill").Goal(
            tool=tool, params_json=params, generation=generation, action_id=action_id)

    def send_goal(self, client: Any, goal: Any, feedback: list[Any] | None = None,
                  timeout_s: float = 10.0) -> Any:
        done = threading.Event()
        fut = client.send_goal_async(
            goal, feedback_callback=(lambda f: feedback.append((time.monotonic(), f.feedback)))
            if feedback is not None else None)
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "the goal was not answered"
        gh = fut.result()
        assert gh is not None and gh.accepted, "the goal was rejected"
        return gh

    @staticmethod
    def result(goal_handle: Any, timeout_s: float = 30.0) -> Any:
        done = threading.Event()
        fut = goal_handle.get_result_async()
        fut.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout_s), "no result in time"
        return fut.result()

    def generation(self, timeout_s: float = 30.0) -> int:
        got = self.messages("solarian_agent/msg/Generation", "skills/generation", "latched",
                            timeout_s=timeout_s)
        assert got, "no latched skills/generation"
        return int(got[-1].value)

    # the graph -----------------------------------------------------------------------------
    def node_names(self) -> set[str]:
        return {f"{ns.rstrip('/')}/{n}" for n, ns in
                self.node.get_node_names_and_namespaces()}

    def wait_for_nodes(self, names: Sequence[str], timeout_s: float = 60.0) -> set[str]:
        """Wait until every fully qualified node name is in the graph; the ones missing."""
        want = set(names)
        wait_until(lambda: want <= self.node_names(), timeout_s, 0.2)
        return want - self.node_names()


def wait_until(pred: Callable[[], Any], timeout_s: float, poll_s: float = 0.05) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(poll_s)
    return bool(pred())
