"""The simulated world on the bus: it stands in for the camera drivers and the arm driver.

``SimWorldComponent`` subscribes ``joint_commands`` and, on every :meth:`step`, advances the
world and publishes what is due:

* ``joint_states`` (``JointState``; the gripper in metres of aperture);
* ``<camera>/image_raw`` for each camera at its rate (sensor-data QoS, read-only BGR arrays,
  increasing ``seq``, ``stamp`` from the clock) and ``<camera>/camera_info`` (latched);
* ``sim/ground_truth`` (a plain dict, :meth:`World.truth`) for tests and benchmarks.

Services: ``sim/reset`` (request ``{"seed": int}`` or ``None`` for the next seed) and
``sim/inject_fault`` (see :meth:`FaultInjector.inject`).  Both answer
``{"ok": bool, "message": str, ...}`` and never raise into the caller for a bad request.

Commands pass the shared safety layer (``solarian_agent.arm.safety``): unknown joints and
non-finite values are refused (counted in ``commands_rejected``), and every tick the arm moves
to ``clamp_target(...)`` — inside the joint limits and no faster than the velocity limits.

Before that, the command gate (``solarian_agent.arm.gate_io``, as on the real arm): one source
holds the arm (operator > external > agent > policy); ``arm_controller/joint_trajectory`` and
``estop/request`` come in through it, ``arm/gate`` and ``diagnostics`` (the gate's refusal
counts) go out.

Scheduling uses the world's simulated time, stamps use the clock: a runtime that advances a
``FakeClock`` by ``dt`` per step gets both in lockstep.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from solarian_agent.arm.gate import CommandGate, GateConfig
from solarian_agent.arm.gate_io import GateIO
from solarian_agent.arm.safety import (
    ArmLimits,
    EStopLatch,
    EStopLatchedError,
    JointLimit,
    UnsafeCommandError,
    Workspace,
    WorkspaceGuard,
    clamp_target,
)
from solarian_agent.arm.stopping import (
    DEFAULT_COMMAND_TIMEOUT_S,
    DEFAULT_STOP_DECEL,
    QuietStop,
)
from solarian_agent.core import names
from solarian_agent.core.clock import Clock
from solarian_agent.core.messages import Image, JointCommand, JointState, OperatorEvent
from solarian_agent.core.transport import LATCHED, SENSOR_DATA, Bus, QoS

from .backend import SimRenderer, SimWorld
from .faults import InvalidFaultError
from .tabletop import OBJECT_NAMES

log = logging.getLogger(__name__)

# type names of the simulator's own interfaces (the ROS shell maps truth to a JSON string)
T_SIM_TRUTH = names.T_SIM_TRUTH
T_SIM_RESET = names.T_SIM_RESET
T_SIM_INJECT_FAULT = names.T_SIM_INJECT_FAULT


@dataclass(frozen=True)
class SimRates:
    """Publication rates in Hz of simulated time; 0 publishes on every step (``truth_hz``:
    0 = never)."""

    joint_states_hz: float = 50.0
    overhead_hz: float = 10.0
    wrist_hz: float = 10.0
    truth_hz: float = 10.0
    max_step: float = 0.1  # the safety layer's per-tick step limit (rad; m for the gripper)
    # commands older than this stop the arm joints (a dead commander leaves nothing driving
    # the arm, as on the real arm), at ``stop_decel`` rad/s²; the jaw keeps its command
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S
    stop_decel: float = DEFAULT_STOP_DECEL

    def __post_init__(self) -> None:
        for name in ("command_timeout_s", "stop_decel"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"SimRates.{name} must be a finite number > 0, got {v!r}")
        for name in ("joint_states_hz", "overhead_hz", "wrist_hz", "truth_hz"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"SimRates.{name} must be a finite number >= 0, got {v!r}")

    def camera_hz(self, camera: str) -> float:
        return float(getattr(self, f"{camera}_hz", self.overhead_hz))


def limits_from_world(world: SimWorld, max_step: float) -> ArmLimits:
    arm = world.arm
    joints = tuple(
        JointLimit(n, arm.limits[n].lower, arm.limits[n].upper,
                   arm.limits[n].velocity * world.config.speed_scale)
        for n in world.joint_names
    )
    return ArmLimits(joints, max_step)


class _Stream:
    """A topic published at a rate on the world's clock."""

    def __init__(self, hz: float) -> None:
        self.period = 1.0 / hz if hz > 0 else 0.0
        self.next_t = -math.inf

    def due(self, t: float) -> bool:
        if t + 1e-9 < self.next_t:
            return False
        # keep a fixed grid; skip missed slots rather than bursting
        if self.period > 0:
            base = t if self.next_t == -math.inf else self.next_t
            while base <= t + 1e-9:
                base += self.period
            self.next_t = base
        return True


class SimWorldComponent:
    """The simulator's node: world + renderer (either backend) wired to the bus."""

    def __init__(
        self,
        bus: Bus,
        clock: Clock,
        world: SimWorld,
        renderer: SimRenderer,
        rates: SimRates = SimRates(),
        node: str = "sim_world",
        limits: ArmLimits | None = None,
        workspace: Workspace | None = None,
        gate: CommandGate | None = None,
    ) -> None:
        self.bus = bus
        self.clock = clock
        self.world = world
        self.renderer = renderer
        self.rates = rates
        self.node = node
        self.limits = limits if limits is not None else limits_from_world(world, rates.max_step)
        # the same workspace box the real arm's controller enforces: the simulated arm obeys
        # the safety layer exactly as the servos would
        arm_joints = world.joint_names[:5]
        self.guard = WorkspaceGuard(workspace or Workspace(),
                                    world.arm.guard_point, arm_joints)
        self._lock = threading.RLock()
        self._goal: dict[str, float] = {}
        self._goal_velocity = 0.0
        self.quiet_stop = QuietStop(clock, rates.command_timeout_s, rates.stop_decel)
        self.commands_received = 0
        self.commands_rejected = 0
        self.last_rejection = ""
        self._seq: dict[str, int] = {c: 0 for c in renderer.cameras}
        self._last_image: dict[str, Image] = {}
        self.frames_published: dict[str, int] = {c: 0 for c in renderer.cameras}
        self.frames_repeated: dict[str, int] = {c: 0 for c in renderer.cameras}

        self._pub_js = bus.publisher(names.JOINT_STATES, names.T_JOINT_STATE, QoS(depth=10), node)
        self._pub_img = {
            c: bus.publisher(names.image_topic(c), names.T_IMAGE, SENSOR_DATA, node)
            for c in renderer.cameras
        }
        self._pub_info = {
            c: bus.publisher(names.camera_info_topic(c), names.T_CAMERA_INFO, LATCHED, node)
            for c in renderer.cameras
        }
        self._pub_truth = bus.publisher(names.SIM_TRUTH, T_SIM_TRUTH, LATCHED, node)
        self._sub_cmd = bus.subscribe(names.JOINT_COMMANDS, names.T_JOINT_COMMAND,
                                      self._on_command, QoS(depth=10), node)
        # e-stop, as on the real arm: latched, holds where the arm is, refuses every command
        # until an explicit reset; tripping it is an operator action, so skills stop too
        self.latch = EStopLatch()
        self._pub_operator = bus.publisher(names.OPERATOR_EVENTS, names.T_OPERATOR_EVENT,
                                           QoS(depth=10), node)
        # the command gate, as on the real arm: one source holds the arm; external
        # trajectories and e-stop requests with a reason come in through it too
        self.gate = gate or CommandGate(GateConfig.shipped())
        self.gate_io = GateIO(bus, clock, self.gate, node=node, apply=self._apply,
                              aimed=self._aimed, limits=lambda: self.limits,
                              guard=lambda: self.guard, estop=self.estop,
                              operator_pub=self._pub_operator,
                              blocked=lambda: (f"e-stop latched ({self.latch.reason})"
                                               if self.latch.tripped else ""),
                              hold=self._hold_for_takeover)
        self._pub_diag = bus.publisher(names.DIAGNOSTICS, names.T_DIAGNOSTICS, QoS(depth=10),
                                       node)
        self._next_diag = -math.inf
        bus.create_service(names.ESTOP, names.T_TRIGGER, self._srv_estop, node)
        bus.create_service(names.ESTOP_RESET, names.T_TRIGGER, self._srv_estop_reset, node)
        bus.create_service(names.SIM_RESET, T_SIM_RESET, self._srv_reset, node)
        bus.create_service(names.SIM_INJECT_FAULT, T_SIM_INJECT_FAULT, self._srv_fault, node)
        self._streams: dict[str, _Stream] = {}
        self._last_t = world.t
        self._init_streams()
        for c in renderer.cameras:
            self._pub_info[c].publish(renderer.camera_info(c, clock.now()))

    def _init_streams(self) -> None:
        r = self.rates
        self._streams = {"joint_states": _Stream(r.joint_states_hz)}
        for c in self.renderer.cameras:
            self._streams[c] = _Stream(r.camera_hz(c))
        if r.truth_hz > 0:
            self._streams["truth"] = _Stream(r.truth_hz)

    # commands ------------------------------------------------------------------------------
    def _on_command(self, msg: JointCommand) -> None:
        with self._lock:
            self.commands_received += 1
            now = self.clock.now()
            if self.latch.tripped:
                why = f"e-stop latched ({self.latch.reason})"
                self.gate_io.refuse(msg.source, why, "estop", now)
            elif len(msg.name) != len(msg.position):
                why = f"command has {len(msg.name)} names but {len(msg.position)} positions"
                self.gate_io.refuse(msg.source, why, "malformed", now)
            else:
                # checked, admitted by source, then _apply; every refusal is on the gate's
                # record (summarised with exact counts, not logged one by one)
                why = self.gate_io.command(msg.source, dict(zip(msg.name, msg.position,
                                                                strict=True)),
                                           float(msg.max_velocity), now)
            if why:
                self.commands_rejected += 1
                self.last_rejection = why

    def _apply(self, goal: Mapping[str, float], source: str, max_velocity: float | None
               ) -> None:
        """The gate's way to the simulated servos (a checked, admitted target)."""
        mv = float(max_velocity or 0.0)
        if not (math.isfinite(mv) and mv >= 0):
            raise UnsafeCommandError(f"max_velocity must be >= 0, got {mv!r}")
        with self._lock:
            if self.latch.tripped:
                raise EStopLatchedError(self.latch.reason)
            self._goal.update(goal)
            self._goal_velocity = mv
            self.quiet_stop.fed()

    def _hold_for_takeover(self, _reason: str) -> None:
        with self._lock:
            self._goal = {}  # the old holder's target is dropped: the arm holds where it is

    def _aimed(self) -> dict[str, float]:
        with self._lock:
            return {**self.world.joint_positions(), **self._goal}

    # stepping ------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        """Advance the world by ``dt`` seconds and publish whatever is due."""
        with self._lock:
            w = self.world
            if self.latch.tripped:
                self._goal = {}  # the old target is dropped, never resumed after a reset
                self.quiet_stop.clear()
            stopping = bool(self._goal) and self._stop_quiet(dt)
            if self._goal and not stopping:
                current = w.joint_positions()
                # the step starts where the world's servos are headed (the 2D world: where
                # the joints are), as the real arm's controller starts from its last goal
                nxt = clamp_target(self.limits, w.control_base(), self._goal, dt,
                                   self._goal_velocity or None)
                w.command(self.guard.safe_step(current, nxt))
            w.step(dt)
            self._publish_due()
        # outside the lock: a takeover publishes an operator event to whoever listens
        self.gate_io.step()
        now = self.clock.now()
        if now >= self._next_diag:
            self._next_diag = now + 1.0
            self._pub_diag.publish({"stamp": now, "status": [self.gate_io.diagnostic(now)]})

    def _stop_quiet(self, dt: float) -> bool:
        """While the commands are quiet: the arm joints' next stop setpoints commanded (the
        jaw keeps its goal), and the goal replaced by the rest pose so that nothing resumes
        the old target.  False while commands are fresh."""
        w = self.world
        arm = w.joint_names[:5]
        q = w.joint_positions()
        sp = self.quiet_stop.step({n: q[n] for n in arm},
                                  {n: float(v) for n, v in zip(arm, w.qd[:5], strict=True)},
                                  dt)
        if sp is None:
            return False
        safe = self.guard.safe_step(q, {**q, **sp})
        self._goal.update({n: safe[n] for n in arm})
        jaw = {n: v for n, v in self._goal.items() if n not in arm}
        w.command({**{n: safe[n] for n in arm}, **jaw})
        return True

    def publish_now(self) -> None:
        """Publish every stream at once (start-up, after a reset)."""
        with self._lock:
            for s in self._streams.values():
                s.next_t = -math.inf
            self._publish_due()

    def _publish_due(self) -> None:
        w = self.world
        t = w.t
        if t < self._last_t:  # the world was reset behind our back: restart the schedules
            self._init_streams()
        self._last_t = t
        now = self.clock.now()
        if self._streams["joint_states"].due(t):
            self._pub_js.publish(JointState(
                stamp=now,
                name=w.joint_names,
                position=tuple(float(v) for v in w.q),
                velocity=tuple(float(v) for v in w.qd),
            ))
        for cam in self.renderer.cameras:
            if not self._streams[cam].due(t):
                continue
            last = self._last_image.get(cam)
            if last is not None and w.faults.frozen(cam, t):
                self.frames_repeated[cam] += 1
                self._pub_img[cam].publish(last)  # the old frame: old seq, old stamp
                continue
            data = self.renderer.render(cam, w)
            data.flags.writeable = False
            self._seq[cam] += 1
            img = Image(data=data, stamp=now, frame_id=self.renderer.specs[cam].frame,
                        seq=self._seq[cam])
            self._last_image[cam] = img
            self.frames_published[cam] += 1
            self._pub_img[cam].publish(img)
        stream = self._streams.get("truth")
        if stream is not None and stream.due(t):
            self._pub_truth.publish(w.truth())

    # services ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        with self._lock:
            self.world.reset(seed)
            self._goal = {}
            self.quiet_stop.clear()
            self._goal_velocity = 0.0
            self._last_image.clear()
            self._init_streams()
            self._publish_due()
            return {"ok": True, "message": f"world reset with seed {self.world.seed}",
                    "seed": self.world.seed}

    def _srv_estop(self, request: Any) -> dict[str, Any]:
        reason = "e-stop pressed"
        if isinstance(request, dict) and request.get("reason"):
            reason = str(request["reason"])
        return self.estop(reason)

    def estop(self, reason: str) -> dict[str, Any]:
        """Latch the e-stop with its reason (the service, ``estop/request``)."""
        with self._lock:
            newly = self.latch.trip(reason)
            self._goal = {}
        if newly:
            self._pub_operator.publish(OperatorEvent("estop", {"reason": reason},
                                                     self.clock.now()))
        return {"success": True, "message": f"e-stop latched: {reason}"}

    def _srv_estop_reset(self, request: Any) -> dict[str, Any]:
        with self._lock:
            released = self.latch.reset()
        if released:
            self._pub_operator.publish(OperatorEvent("estop_reset", {}, self.clock.now()))
        return {"success": released,
                "message": "e-stop released; send a new command to move" if released
                else "e-stop was not latched"}

    def _srv_reset(self, request: Any) -> dict[str, Any]:
        seed: Any = None
        if isinstance(request, dict):
            seed = request.get("seed")
        elif isinstance(request, int) and not isinstance(request, bool):
            seed = request
        elif request is not None:
            return {"ok": False, "message": "sim/reset takes {'seed': int} or nothing"}
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            return {"ok": False, "message": f"sim/reset: seed must be an integer, got {seed!r}"}
        return self.reset(seed)

    def inject_fault(self, request: Any) -> dict[str, Any]:
        with self._lock:
            try:
                msg = self.world.faults.inject(request, self.world.t, OBJECT_NAMES)
            except InvalidFaultError as e:
                return {"ok": False, "message": str(e)}
            return {"ok": True, "message": msg}

    def _srv_fault(self, request: Any) -> dict[str, Any]:
        return self.inject_fault(request)

    def close(self) -> None:
        self._sub_cmd.close()
