"""``arm_node``: the SO-101 hardware interface (Feetech servo bus), a lifecycle node.

* configure: open the bus, read the calibration (config/arm_so101.yaml), start the control loop
  (it reads the arm and publishes ``joint_states`` and ``diagnostics`` from now on);
* activate: enable torque; joint commands are accepted (clamped, speed-limited, watched by the
  command watchdog: no command within ``command_timeout_s`` -> hold);
* deactivate: hold where the arm is and refuse commands;
* cleanup / shutdown: stop the loop and close the bus;
* error: the safe state — the e-stop is latched (hold or torque off).

``estop`` (latched, wins over everything) and ``estop_reset`` are std_srvs/Trigger services;
``set_torque`` is std_srvs/SetBool.  With ``autostart`` (default) the node configures and
activates itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import rclpy
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ..arm.stopping import DEFAULT_COMMAND_TIMEOUT_S
from ..core.errors import ConfigError
from . import common, components
from .bridge import Bridge
from .components import Loop


class ArmNode(LifecycleNode):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__("arm")
        self.core_: components.ArmCore | None = None
        self.runner: common.LoopRunner | None = None
        self._lost_handled = False
        clock = common.RosClock(self)
        nc = components.build_arm_core(
            clock,
            arm_config=str(common.declare(self, "arm_config",
                                          common.share_file("config", "arm_so101.yaml"))),
            port=str(common.declare(self, "port", "", "serial port ('' = the YAML's)")),
            simulated_bus=bool(common.declare(self, "simulated_bus", False,
                                              "simulated servos on a pseudo-terminal")),
            command_timeout_s=float(common.declare(self, "command_timeout_s",
                                                          DEFAULT_COMMAND_TIMEOUT_S)),
            estop_action=str(common.declare(self, "estop_action", "hold", "hold | torque_off")))
        self.node_core = nc
        self.core_ = nc.parts["arm"]
        self.bridge = Bridge(self, nc.bus)
        self.bridge.add(nc.spec.endpoints)

    def _start_loop(self) -> None:
        assert self.core_ is not None
        self._lost_handled = False
        self.runner = common.LoopRunner([Loop("control", self.core_.period_s,
                                              self._control)], self.get_logger())
        self.runner.start()

    def _control(self) -> None:
        core = self.core_
        assert core is not None
        core.step()
        if core.active and core.bus_lost and not self._lost_handled:
            # the servos stopped answering while active: the e-stop is latched already; the
            # lifecycle goes through ErrorProcessing (on_deactivate reports ERROR) so a
            # lifecycle manager sees the error and the node ends unconfigured, still latched
            self._lost_handled = True
            self.get_logger().error("servo bus lost while active: going to the error state")
            self.trigger_deactivate()

    def _stop_loop(self) -> None:
        if self.runner is not None:
            self.runner.join()
            self.runner = None

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self.core_ is not None
        if self.core_.controller is not None:
            # back in unconfigured after on_error (which keeps the e-stop latched and the bus
            # open): close the old bus before opening it again
            self._stop_loop()
            self.core_.cleanup()
        try:
            self.core_.configure()
        except Exception as e:
            self.get_logger().error(f"configure failed: {e}")
            self.core_.cleanup()
            return TransitionCallbackReturn.FAILURE
        self._start_loop()
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self.core_ is not None
        try:
            self.core_.activate()
        except Exception as e:
            self.get_logger().error(f"activate failed: {e}")
            return TransitionCallbackReturn.FAILURE
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self.core_ is not None
        self.core_.deactivate()
        if self.core_.bus_lost:
            return TransitionCallbackReturn.ERROR  # -> on_error: the safe state
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        assert self.core_ is not None
        self.core_.cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        assert self.core_ is not None
        self.core_.deactivate()
        self._stop_loop()
        self.core_.cleanup()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        # SUCCESS -> unconfigured (a configure may follow; on_configure closes the old bus);
        # the e-stop stays latched until an estop_reset
        assert self.core_ is not None
        self.get_logger().error(f"error in state {state.label}: going safe (e-stop latched)")
        try:
            self.core_.error(f"lifecycle error in {state.label}")
        except Exception as e:  # the bus itself failed: nothing more to do here
            self.get_logger().error(f"could not latch the e-stop: {e}")
            return TransitionCallbackReturn.FAILURE  # -> finalized
        return TransitionCallbackReturn.SUCCESS


def main(args: Sequence[str] | None = None) -> int:
    stop = common.init(args)
    try:
        node = ArmNode()
        autostart = bool(common.declare(node, "autostart", True,
                                        "configure and activate at start"))
    except ConfigError as e:
        print(f"arm: invalid configuration: {e}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    log = node.get_logger()
    spinner = common.Spinner(node, stop, bridge=node.bridge).start()
    # the node's beat on nodes/heartbeat, whatever its lifecycle state: the planner sees the
    # arm's process up, lost or back (the control loop runs only while active)
    beats = common.LoopRunner([lp for lp in node.node_core.loops if lp.name == "heartbeat"],
                              log)
    beats.start()
    try:
        if autostart and not stop.is_set():
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                node.trigger_activate()
            else:
                log.error("autostart: configure failed; the node stays unconfigured")
        while not stop.is_set() and rclpy.ok():
            stop.wait(0.2)
    finally:
        beats.join()
        node.bridge.close()
        node._stop_loop()
        if node.core_ is not None:
            node.core_.deactivate()
            node.core_.cleanup()
        spinner.close()
    return 1 if spinner.failed.is_set() else 0

if __name__ == "__main__":
    sys.exit(main())
