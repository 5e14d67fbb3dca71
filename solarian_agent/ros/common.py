"""What every node shell shares: the ROS clock as a core Clock, parameters, the loop threads
and the run / shutdown sequence.

Only a node's own ``main`` calls ``rclpy.init``.  SIGINT / SIGTERM do not tear the context down
under the node (rclpy's handler is off): they stop the loops, abort running goals with a result,
let the executor deliver those results, then shut down.
"""

from __future__ import annotations

import datetime as _dt
import faulthandler
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import Executor, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from ..core.config import AgentConfig
from ..core.errors import ConfigError, TransportError
from . import components
from .bridge import Bridge
from .components import Loop, NodeCore


class RosClock:
    """The core's Clock over a node's ROS clock (so ``use_sim_time`` and bag replays work and
    stamps agree across nodes)."""

    def __init__(self, node: Node) -> None:
        self._clock = node.get_clock()

    def now(self) -> float:
        return float(self._clock.now().nanoseconds) * 1e-9

    def wall(self) -> str:
        return _dt.datetime.fromtimestamp(self.now(), tz=_dt.timezone.utc).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")

    def epoch(self) -> float:
        return self.now()  # ROS time is Unix time (or the bag's sim time)

    def sleep_until(self, t: float, stop: threading.Event | None = None) -> None:
        ev = stop or threading.Event()
        while not ev.is_set():
            left = t - self.now()
            if left <= 0:
                return
            ev.wait(min(left, 0.01))


def init(args: Sequence[str] | None = None) -> threading.Event:
    """rclpy.init without rclpy's signal handler (see the module docstring); the returned
    event is set by SIGINT / SIGTERM from now on (the node's ``stop``)."""
    stop = threading.Event()
    stop_on_signals(stop)
    # SIGUSR1 writes every thread's stack to stderr: how a node that does not stop is
    # diagnosed (the tests send it before they kill a node that missed its deadline)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):  # older rclpy
        rclpy.init(args=args)
    return stop


def declare(node: Node, name: str, default: Any, description: str = "") -> Any:
    """Declare a parameter typed by its default (a ``float`` default makes a DOUBLE parameter)
    and return its value.  A value of another type (``-p seed:=1.5``, ``-p slip_p:=0``) is a
    :class:`ConfigError` naming the parameter, so the node stops with a clear message instead
    of rclpy's traceback."""
    from rclpy.exceptions import ParameterException  # InvalidParameterType/ValueException

    try:
        if not node.has_parameter(name):
            node.declare_parameter(name, default, ParameterDescriptor(description=description))
        return node.get_parameter(name).value
    except ParameterException as e:
        raise ConfigError(f"parameter {name}",
                          f"{e} (expected a {type(default).__name__}, like {default!r})") from e


def csv(value: Any) -> list[str]:
    """A list parameter given as a list or as 'a,b,c'."""
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value or "").split(",") if v.strip()]


def share_file(*parts: str) -> str:
    """A file in the installed share/solarian_agent (or the source tree)."""
    try:
        import os

        from ament_index_python.packages import get_package_share_directory

        path = os.path.join(get_package_share_directory("solarian_agent"), *parts)
        if os.path.exists(path):
            return path
    except Exception:
        pass
    return str(components.share_dir().joinpath(*parts))


def agent_config(node: Node) -> AgentConfig:
    """The agent: block from ``config_file`` with the ``cameras`` / ``control_period_s``
    parameters applied, validated as in the core (a bad value names its YAML path)."""
    path = declare(node, "config_file", share_file("config", "controller.yaml"),
                   "YAML file with the agent: block")
    cams = csv(declare(node, "cameras", "", "camera names, comma separated ('' = config)"))
    period = float(declare(node, "control_period_s", 0.0, "loop period (0 = config)"))
    overrides: dict[str, Any] = {"cameras": cams or None}
    if period > 0:
        overrides["control_period_s"] = period
    return components.load_config(path, overrides)


def camera_model_params(node: Node) -> tuple[str, str]:
    """``camera_models`` (sim | calibrated) and ``calibration_dir`` ('' = the default,
    ~/.config/solarian_agent/cameras): how pixels become table positions."""
    models = str(declare(node, "camera_models", "sim",
                         "sim (the simulator's cameras) | calibrated (calibration files)"))
    cal_dir = str(declare(node, "calibration_dir", "",
                          "camera calibration directory ('' = ~/.config/solarian_agent/cameras)"))
    return models, cal_dir


class LoopRunner:
    """One thread per loop; every wait is bounded; an exception is logged, never fatal."""

    def __init__(self, loops: Sequence[Loop], log: Any) -> None:
        self.loops = list(loops)
        self.log = log
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def _run(self, loop: Loop) -> None:
        next_t = time.monotonic()
        while not self.stop.is_set():
            try:
                loop.fn()
            except Exception as e:  # the loop survives; the component decides what failed
                self.log.error(f"{loop.name}: {type(e).__name__}: {e}")
                self.stop.wait(0.1)
            if loop.period_s <= 0:
                continue
            next_t += loop.period_s
            now = time.monotonic()
            if next_t < now:  # fell behind: skip, never burst
                next_t = now
            self.stop.wait(next_t - now)

    def start(self) -> None:
        for loop in self.loops:
            t = threading.Thread(target=self._run, args=(loop,), name=f"loop-{loop.name}",
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def join(self, timeout_s: float = 2.0) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout_s)


def start_with_retry(fn: Callable[[], None], timeout_s: float, log: Any, what: str,
                     stop: threading.Event) -> None:
    """Call ``fn`` until it stops raising a transport error (a server not up yet)."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            fn()
            return
        except TransportError as e:
            if time.monotonic() >= end or stop.is_set():
                raise
            log.info(f"waiting for {what}: {e}")
            stop.wait(1.0)


class Spinner:
    """A node's executor spinning on its own thread, and its orderly end.

    rclpy re-raises a callback's exception out of ``spin()``; the node would then run on deaf
    to ROS, so the error is logged and ``stop`` (and ``failed``) set: the node shuts down and
    exits non-zero instead.  :meth:`close` shuts the executor down and *joins* the thread
    before the node is destroyed: a thread left inside rclpy's wait when the interpreter exits
    aborts the process ("terminate called without an active exception", exit -6)."""

    def __init__(self, node: Node, stop: threading.Event, num_threads: int = 1,
                 bridge: Bridge | None = None) -> None:
        """``num_threads`` 1: a SingleThreadedExecutor (every node's choice, see
        :mod:`.bridge` on threading); more: a MultiThreadedExecutor."""
        self.node = node
        self.log = node.get_logger()
        self.stop = stop
        self.failed = threading.Event()
        self.context = node.context
        self.executor: Executor = (
            SingleThreadedExecutor(context=self.context) if num_threads <= 1
            else MultiThreadedExecutor(num_threads=num_threads, context=self.context))
        self.executor.add_node(node)
        self.bridge = bridge
        self.thread = threading.Thread(target=self._spin, name="executor", daemon=True)

    def _spin(self) -> None:
        if self.bridge is not None:
            self.bridge.executor_thread = threading.get_ident()
        try:
            self.executor.spin()
        except Exception as e:
            if self.context.ok() and not self.stop.is_set():
                self.log.error(f"executor stopped: {type(e).__name__}: {e}")
                self.failed.set()
            self.stop.set()

    def start(self) -> Spinner:
        self.thread.start()
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop spinning, wait (bounded) for the callbacks in flight and the thread, then
        destroy the node and shut the context down."""
        try:
            self.executor.shutdown(timeout_sec=timeout_s)
        except Exception as e:  # e.g. a callback that raised while finishing
            self.log.warning(f"executor shutdown: {type(e).__name__}: {e}")
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        if self.thread.is_alive():
            self.log.error("the executor thread did not stop; exiting anyway")
        try:
            self.node.destroy_node()
        finally:
            self.context.try_shutdown()


def stop_on_signals(stop: threading.Event) -> None:
    """SIGINT / SIGTERM set ``stop`` (the node then shuts down in order and exits 0)."""

    def on_signal(_sig: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, on_signal)
        except ValueError:  # not the main thread (tests)
            pass


def run(node: Node, core: NodeCore, bridge: Bridge, *, stop: threading.Event | None = None,
        on_start: Callable[[threading.Event], None] | None = None, num_threads: int = 1,
        startup_timeout_s: float = 60.0, start_loops: bool = True) -> int:
    """Spin ``node``, start the core (retrying while its servers come up), run its loops until
    SIGINT / SIGTERM, then shut down in order: loops, bridge (goals cancelled), core (goals
    end with a result), a grace period for the results to go out, the executor and its
    thread, the node, the context.
    ``on_start(stop)`` runs after the core started; it must return soon once ``stop`` is set."""
    log = node.get_logger()
    if stop is None:
        stop = threading.Event()
        stop_on_signals(stop)
    spinner = Spinner(node, stop, num_threads, bridge).start()
    runner = LoopRunner(core.loops, log)
    code = 0
    try:
        start_with_retry(core.start, startup_timeout_s, log, "the graph", stop)
        if on_start is not None and not stop.is_set():
            on_start(stop)
        if start_loops and not stop.is_set():
            runner.start()
            log.info(f"{node.get_name()} running")
        while not stop.is_set() and rclpy.ok():
            stop.wait(0.2)
    except TransportError as e:
        if not stop.is_set():  # a signal during start-up is a normal stop, not a failure
            log.error(f"{node.get_name()} failed: {e}")
            code = 1
    except Exception as e:
        log.error(f"{node.get_name()} failed: {type(e).__name__}: {e}")
        code = 1
    finally:
        # each stage is logged: a node slow to stop shows in its output where it was
        log.info(f"{node.get_name()} stopping: loops")
        runner.join()
        bridge.close()
        log.info(f"{node.get_name()} stopping: core")
        try:
            core.shutdown()
        except Exception as e:
            log.warning(f"shutdown: {e}")
        log.info(f"{node.get_name()} stopping: goals' results, executor")
        bridge.wait_for_goals(3.0)  # the goals' results go out before the executor stops
        spinner.close()
    if spinner.failed.is_set():
        code = 1
    return code


def config_error_exit(node: Node, e: Exception) -> int:
    """A bad parameter or configuration: say which, release the node and exit with 2."""
    node.get_logger().error(f"invalid configuration: {e}")
    node.destroy_node()
    rclpy.try_shutdown()
    return 2


__all__ = ["LoopRunner", "RosClock", "Spinner", "agent_config", "camera_model_params",
           "config_error_exit", "csv",
           "declare", "init", "run", "share_file", "start_with_retry",
           "stop_on_signals"]
