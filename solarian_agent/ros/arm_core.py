"""The arm node's core without ROS: the Feetech arm behind a lifecycle (:class:`ArmCore`), its
readings as diagnostics, and the node core that runs its control loop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..arm.gate import CommandGate, GateConfig
from ..arm.gate_io import GateIO
from ..arm.stopping import DEFAULT_COMMAND_TIMEOUT_S
from ..core import names
from ..core.clock import Clock
from ..core.messages import JointCommand, OperatorEvent
from ..core.transport import Bus
from ..rosmsg import graph
from .node_config import share_dir
from .node_core import Loop, NodeCore

log = logging.getLogger(__name__)

SIMULATED_BUS_TIMEOUT_S = 0.2  # per answer, with simulated_bus:=true


class ArmCore:
    """The Feetech arm behind a lifecycle: ``configure`` opens the bus and reads the
    calibration, ``activate`` enables torque and lets commands through, ``deactivate`` holds,
    ``error`` latches the e-stop (the safe state), ``cleanup`` closes the bus.

    The control loop (:meth:`step`) runs from configure to cleanup, so an inactive arm still
    holds and still reports ``joint_states`` and diagnostics; commands are refused unless
    active.  The controller's command watchdog holds the arm when commands stop."""

    def __init__(self, bus: Bus, clock: Clock, *, arm_config: str = "",
                 port: str = "", simulated_bus: bool = False,
                 command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S, estop_action: str = "hold",
                 diagnostics_period_s: float = 1.0, node: str = "arm") -> None:
        self.bus = bus
        self.clock = clock
        self.arm_config = arm_config or str(share_dir() / "config" / "arm_so101.yaml")
        self.port = port
        self.simulated_bus = simulated_bus
        self.command_timeout_s = command_timeout_s
        self.estop_action = estop_action
        self.diagnostics_period_s = diagnostics_period_s
        self.arm: Any = None
        self.controller: Any = None
        self._sim: Any = None
        self.active = False
        self.refused = 0
        self.last_refusal = ""
        self._next_diag = 0.0
        self._lock = threading.Lock()
        self._js = bus.publisher(names.JOINT_STATES, names.T_JOINT_STATE, graph.RELIABLE, node)
        self._diag = bus.publisher(names.DIAGNOSTICS, names.T_DIAGNOSTICS, graph.RELIABLE, node)
        bus.subscribe(names.JOINT_COMMANDS, names.T_JOINT_COMMAND, self._on_command,
                      graph.RELIABLE, node)
        # a latched e-stop (pressed, or tripped by a servo fault) is announced as an operator
        # event, so the skill servers stop their skills and start none until the reset
        self._op = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT, graph.RELIABLE,
                                 node)
        self._was_estop = False
        # an e-stop latched when the bus is closed (cleanup, a lifecycle error) is latched
        # again on the next configure: only estop_reset releases it
        self._carried_estop: str | None = None
        # the command gate: one source holds the arm (config ``gate:`` in the arm's YAML);
        # joint commands, external trajectories and e-stop requests all pass it
        self.gate = CommandGate(GateConfig.from_yaml(self.arm_config))
        self.gate_io = GateIO(bus, clock, self.gate, node=node, apply=self._apply,
                              aimed=self._aimed, limits=self._limits, guard=self._guard,
                              estop=self._estop_requested, operator_pub=self._op,
                              blocked=self._blocked, hold=self._hold_for_takeover)
        bus.create_service(names.ESTOP, names.T_TRIGGER, self._srv_estop, node)
        bus.create_service(names.ESTOP_RESET, names.T_TRIGGER, self._srv_reset, node)
        bus.create_service(graph.SET_TORQUE, graph.T_SET_BOOL, self._srv_torque, node)

    @property
    def period_s(self) -> float:
        return float(self.controller.config.period_s) if self.controller else 0.02

    # lifecycle -----------------------------------------------------------------------------
    def configure(self) -> None:
        from ..hw.feetech.arm import FeetechArm, FeetechArmConfig
        from ..hw.feetech.calibration import ArmCalibration, default_so101
        from ..hw.feetech.controller import ArmController, ArmControllerConfig
        from ..hw.feetech.health import HealthMonitor

        cfg = FeetechArmConfig.from_yaml(self.arm_config)
        cal = None
        if self.simulated_bus:
            from ..hw.feetech.simbus import SimulatedBus

            self._sim = SimulatedBus()
            self._sim.__enter__()
            # simulated servos answer from a Python thread of this node, so their latency
            # follows the host's load, not the wire's: a real bus's 25 ms would read as lost
            cfg = replace(cfg, port=self._sim.port_name,
                          timeout_s=max(cfg.timeout_s, SIMULATED_BUS_TIMEOUT_S))
            cal = default_so101()
        elif self.port:
            cfg = replace(cfg, port=self.port)
        if cal is None:
            cal = ArmCalibration.load(cfg.calibration_file)
        arm = FeetechArm(cfg, calibration=cal)
        arm.connect()
        self.arm = arm
        self.controller = ArmController(
            arm, self.clock, ArmControllerConfig(rate_hz=cfg.rate_hz,
                                                 command_timeout_s=self.command_timeout_s,
                                                 estop_action=self.estop_action,
                                                 enable_torque_on_start=False),
            on_event=self._on_arm_event,
            health=HealthMonitor(cfg.health, read_current=arm.read_current_a))
        if self._carried_estop is not None:
            self.controller.estop(self._carried_estop)

    def _on_arm_event(self, kind: str, detail: dict[str, Any]) -> None:
        """Derating goes to the node's log and, while it lasts, into the arm's diagnostics
        message with its reason.  Not onto ``operator/events``: every event there advances
        the executor's generation and stops the running skill, and a slower arm is no reason
        to abandon a task (a servo that trips latches the e-stop, which is announced there)."""
        if kind == "derate":
            log.warning("arm derating: speed %.0f%%: %s", 100 * detail["speed_factor"],
                        detail["reason"])

    @property
    def bus_lost(self) -> bool:
        return self.controller is not None and bool(self.controller.bus_lost)

    def activate(self) -> None:
        if self.controller is None:
            raise RuntimeError("arm is not configured")
        self.controller.enable_torque()
        self.active = True

    def deactivate(self) -> None:
        self.active = False
        if self.controller is not None:
            self.controller.hold("deactivated")

    def cleanup(self) -> None:
        self.active = False
        if self.controller is not None and self.controller.latch.tripped:
            self._carried_estop = str(self.controller.latch.reason or "e-stop")
        arm, self.arm, self.controller = self.arm, None, None
        if arm is not None:
            try:
                arm.disconnect()
            except Exception as e:  # closing must not fail the transition
                log.warning("arm: disconnect failed: %s", e)
        if self._sim is not None:
            self._sim.__exit__(None, None, None)
            self._sim = None

    def error(self, reason: str) -> None:
        """The safe state: e-stop latched (hold or torque off, as configured)."""
        self.active = False
        if self.controller is not None:
            self.controller.estop(reason)
            self.controller.step()

    # loop ----------------------------------------------------------------------------------
    def step(self) -> None:
        ctl = self.controller
        if ctl is None:
            return
        reading = ctl.step()
        latched = bool(ctl.latch.tripped)
        if latched != self._was_estop:
            self._was_estop = latched
            self._op.publish(OperatorEvent("estop" if latched else "estop_reset",
                                           {"reason": ctl.latch.reason}, self.clock.now()))
        js = reading.joint_state
        if js is not None:
            self._js.publish(js)
        self.gate_io.step()
        now = self.clock.now()
        if now >= self._next_diag:
            self._next_diag = now + self.diagnostics_period_s
            diag = arm_diagnostics(reading, now)
            diag["status"].append(self.gate_io.diagnostic(now))
            self._diag.publish(diag)

    # inputs --------------------------------------------------------------------------------
    def _on_command(self, cmd: JointCommand) -> None:
        now = self.clock.now()
        if len(cmd.name) != len(cmd.position):
            why = f"command has {len(cmd.name)} names but {len(cmd.position)} positions"
            self.gate_io.refuse(cmd.source, why, "malformed", now)
        else:
            why = self.gate_io.command(cmd.source, dict(zip(cmd.name, cmd.position, strict=True)),
                                       cmd.max_velocity or None, now)
        if why:
            # on the gate's record, summarised once a second with exact counts: a flood of
            # bad commands is not a flood of log lines
            self.refused += 1
            self.last_refusal = why

    # the gate's view of the controller ------------------------------------------------------
    def _apply(self, target: Mapping[str, float], source: str,
               max_velocity: float | None) -> None:
        ctl = self.controller
        if ctl is None or not self.active:
            raise RuntimeError("the arm is not active")
        ctl.command(target, source=source, max_velocity=max_velocity)

    def _hold_for_takeover(self, reason: str) -> None:
        if self.controller is not None:
            self.controller.hold(reason)

    def _blocked(self) -> str:
        ctl = self.controller
        if ctl is None or not self.active:
            return "the arm is not active"
        if ctl.latch.tripped:
            return f"e-stop latched ({ctl.latch.reason})"
        return ""

    def _aimed(self) -> dict[str, float]:
        ctl = self.controller
        return {} if ctl is None else dict(ctl.setpoint())

    def _limits(self) -> Any:
        return None if self.controller is None else self.controller.limits

    def _guard(self) -> Any:
        return None if self.controller is None else self.controller.guard

    def _estop_requested(self, reason: str) -> None:
        """An e-stop from any ROS node (``estop/request``), with its reason."""
        if self.controller is None:
            self._carried_estop = reason
        else:
            self.controller.estop(reason)

    def _srv_estop(self, _req: Any) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        self.controller.estop("e-stop service")
        return {"success": True, "message": "e-stop latched"}

    def _srv_reset(self, _req: Any) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        was = self.controller.reset_estop()
        if was:
            self._carried_estop = None
        return {"success": bool(was), "message": "e-stop released" if was
                else "the e-stop was not latched"}

    def _srv_torque(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if self.controller is None:
            return {"success": False, "message": "arm is not configured"}
        if req.get("data"):
            self.controller.enable_torque()
            return {"success": True, "message": "torque enabled"}
        self.controller.disable_torque()
        return {"success": True, "message": "torque disabled"}


def arm_diagnostics(reading: Any, stamp: float) -> dict[str, Any]:
    """An ``ArmReading`` as the DiagnosticArray payload (see convert.diagnostics_to_ros)."""
    d = reading.diagnostics
    levels = {"ok": 0, "warn": 1, "error": 2}
    status = [{"name": "arm", "level": levels.get(d.level, 2), "message": d.message,
               "hardware_id": "so101",
               "values": {"mode": reading.mode, "estop": d.estop, "estop_reason": d.estop_reason,
                          "watchdog_expired": d.watchdog_expired,
                          "consecutive_faults": d.consecutive_faults,
                          **{f"bus.{k}": v for k, v in d.bus.items()}}}]
    health = {h.joint: h for h in getattr(d, "health", ())}
    for s in d.servos:
        h = health.get(s.joint)
        level = max(levels.get(s.level, 2), levels.get(h.level, 2) if h else 0)
        message = s.message if h is None else (
            h.message if s.message == "ok" else f"{s.message}; {h.message}")
        status.append({"name": f"arm/{s.joint}", "level": level,
                       "message": message, "hardware_id": f"servo {s.servo_id}",
                       "values": {"voltage_v": s.voltage_v, "temperature_c": s.temperature_c,
                                  "load": s.load, "moving": s.moving,
                                  **(h.values if h else {})}})
    if getattr(d, "speed_factor", 1.0) < 1.0:
        status[0]["values"]["speed_factor"] = d.speed_factor
    return {"stamp": stamp, "status": status}


def build_arm_core(clock: Clock, bus: Bus | None = None, **kw: Any) -> NodeCore:
    bus = bus or Bus()
    core = ArmCore(bus, clock, **kw)
    return NodeCore(bus, graph.arm_node(), [Loop("control", 0.02, core.step)],
                    shutdown=core.cleanup, parts={"arm": core})


__all__ = ["SIMULATED_BUS_TIMEOUT_S", "ArmCore", "arm_diagnostics", "build_arm_core"]
