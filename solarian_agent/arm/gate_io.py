"""The command gate on the bus, shared by every arm driver (the real arm's node and both
simulators), so the gate is the same whatever moves.

:class:`GateIO` stands between the bus and the driver's command path:

* :meth:`admit` asks the gate for every joint command (``joint_commands``, by its ``source``);
  a takeover by a source of higher priority is announced as an ``arm_taken`` operator event
  with its reason, so the executor stops the running skill through its action and the planner
  hears of it;
* ``arm_controller/joint_trajectory`` (trajectory_msgs/JointTrajectory, ``source = external``):
  the whole trajectory is checked before any point runs (:mod:`.trajectory`) and played back on
  ``time_from_start`` by :meth:`step`, through the same command path and the same gate;
* ``estop/request`` (std_msgs/String: the reason) latches the e-stop from any ROS node;
* ``arm/gate`` (latched std_msgs/String, JSON): the holder, republished when it changes;
* refusals go to the gate's record; :meth:`step` writes one summary line per period with the
  exact counts, and :meth:`diagnostic` is the gate's entry for ``/diagnostics``.

The driver passes in what it owns: ``apply(target, source, max_velocity)`` (its command path,
raising on an unsafe command), ``aimed()`` (where the arm is headed), its limits and workspace
guard, ``estop(reason)`` and its operator-event publisher.  Bus callbacks only queue or record;
the driver's control loop calls :meth:`step`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from solarian_agent.core import names
from solarian_agent.core.clock import Clock
from solarian_agent.core.messages import OperatorEvent
from solarian_agent.core.transport import LATCHED, Bus, QoS

from .gate import Admission, ArmHeldError, CommandGate, Refusal, Source, UnknownSourceError
from .safety import ArmLimits, UnsafeCommandError, WorkspaceGuard, validate_target
from .trajectory import Trajectory, TrajectoryPlayer, TrajectoryRefusedError, check_trajectory

log = logging.getLogger(__name__)

Apply = Callable[[Mapping[str, float], str, float | None], None]


class GateIO:
    def __init__(self, bus: Bus, clock: Clock, gate: CommandGate, *, node: str,
                 apply: Apply, aimed: Callable[[], Mapping[str, float]],
                 limits: Callable[[], ArmLimits | None],
                 guard: Callable[[], WorkspaceGuard | None],
                 estop: Callable[[str], None], operator_pub: Any,
                 blocked: Callable[[], str] = lambda: "",
                 hold: Callable[[str], None] = lambda _reason: None) -> None:
        self.clock = clock
        self.gate = gate
        self._apply = apply
        self._aimed = aimed
        self._limits = limits
        self._guard = guard
        self._estop = estop
        self._op = operator_pub
        # why the driver takes no command now ("" when it does): a latched e-stop, an inactive
        # arm; such a command is refused before it may take the arm
        self._blocked = blocked
        # a takeover drops the old holder's target (the arm holds where it is) before the new
        # holder's command: the skill's last target must not keep steering the arm
        self._hold = hold
        self._lock = threading.Lock()
        self._incoming: Trajectory | None = None
        self.player: TrajectoryPlayer | None = None
        self.trajectories_accepted = 0
        self.summaries: list[str] = []  # every summary line written (tests, the panel)
        self._shown: tuple[str, str] | None = None
        self._pub_gate = bus.publisher(names.ARM_GATE, names.T_STRING, LATCHED, node)
        bus.subscribe(names.ARM_TRAJECTORY, names.T_JOINT_TRAJECTORY, self._on_trajectory,
                      QoS(depth=10), node)
        bus.subscribe(names.ESTOP_REQUEST, names.T_STRING, self._on_estop_request,
                      QoS(depth=10), node)

    # joint commands ------------------------------------------------------------------------
    def admit(self, source: str, now: float) -> str:
        """"" when a command from ``source`` may go on to the arm, else the refusal's reason
        (already on the record).  A takeover is announced and stops a playing trajectory."""
        try:
            adm = self.gate.admit(source, now)
        except (ArmHeldError, UnknownSourceError) as e:
            return str(e)
        self._taken(adm, now)
        return ""

    def _taken(self, adm: Admission, now: float) -> None:
        if not adm.taken_from:
            return
        if adm.taken_from == Source.EXTERNAL and adm.source != Source.EXTERNAL:
            with self._lock:
                self.player = None
        reason = f"the {adm.source} took the arm from the {adm.taken_from}"
        self._hold(reason)
        log.warning("arm gate: %s", reason)
        self._op.publish(OperatorEvent("arm_taken", {"by": adm.source, "from": adm.taken_from,
                                                     "reason": reason}, now))

    def command(self, source: str, target: Mapping[str, float], max_velocity: float | None,
                now: float) -> str:
        """One joint command through the gate: checked (names, values, workspace) before it
        may take the arm, then admitted by source, then handed to the driver; "" when it went
        through, else the reason, which is on the record.  Values outside the joint limits
        are clipped by the driver and recorded as clamped."""
        limits = self._limits()
        if limits is None:
            self.refuse(source, "the arm is not active (not configured)", "inactive", now)
            return "the arm is not active (not configured)"
        try:
            checked = validate_target(limits, target)
            guard = self._guard()
            if guard is not None and any(j in checked for j in guard.joints):
                current = dict(self._aimed())
                if all(j in {**current, **checked} for j in guard.joints):
                    guard.check_target(checked, current)
        except UnsafeCommandError as e:
            value = e.value if isinstance(e.value, float) else None
            self.refuse(source, str(e), refusal_code(e), now, joint=e.joint, value=value)
            return str(e)
        why = self._blocked() or ""
        if why:
            self.refuse(source, why, "estop" if "e-stop" in why else "inactive", now)
            return why
        why = self.admit(source, now)
        if why:
            return why
        try:
            self._apply(checked, source, max_velocity)
        except Exception as e:  # e-stop latched, inactive, a bad max_velocity: refused
            self.refuse(source, str(e), refusal_code(e), now)
            return str(e)
        for j, v, window in clamped_joints(limits, checked):
            self.refuse(source, f"{j} = {v:.4f} clipped into {window}", "limit", now,
                        joint=j, value=v, limit=window, kind="clamped")
        return ""

    def refuse(self, source: str, reason: str, code: str, now: float, *, joint: str = "",
               value: float | None = None, limit: str = "", kind: str = "refused") -> None:
        self.gate.log.add(Refusal(now, source, reason, code, kind, joint, value, limit))

    # trajectories --------------------------------------------------------------------------
    def _on_trajectory(self, traj: Trajectory) -> None:
        now = self.clock.now()
        src = Source.EXTERNAL.value
        limits = self._limits()
        if limits is None:
            self.refuse(src, "the arm is not active (not configured)", "inactive", now)
            return
        try:
            check_trajectory(traj, limits, self._guard(), self._aimed())
        except TrajectoryRefusedError as e:
            # the whole trajectory is refused: nothing of it moves
            self.refuse(src, f"trajectory refused: {e}", e.code, now, joint=e.joint,
                        value=e.value, limit=e.limit)
            return
        with self._lock:
            self._incoming = traj

    def _on_estop_request(self, reason: Any) -> None:
        text = str(reason).strip() if reason is not None else ""
        self._estop(f"e-stop requested: {text or 'no reason given'}")

    # the control loop ----------------------------------------------------------------------
    def step(self) -> None:
        """Start a queued trajectory, play the current one, write the refusal summary when
        due and republish the holder when it changed."""
        now = self.clock.now()
        with self._lock:
            traj, self._incoming = self._incoming, None
        blocked = self._blocked() if traj is not None else ""
        if blocked:
            self.refuse(Source.EXTERNAL, f"trajectory refused: {blocked}",
                        "estop" if "e-stop" in blocked else "inactive", now)
            traj = None
        # a trajectory refused here (held by the operator) is on the gate's record already
        if traj is not None and not self.admit(Source.EXTERNAL, now):
            with self._lock:
                self.player = TrajectoryPlayer(traj, self._aimed(), now)
            self.trajectories_accepted += 1
        self._play(now)
        summary = self.gate.log.summary_due(now)
        if summary is not None:
            line = summary.line()
            self.summaries.append(line)
            del self.summaries[:-100]
            log.warning("arm gate: %s", line)
        self.publish_holder(now)

    def _play(self, now: float) -> None:
        with self._lock:
            player = self.player
        if player is None:
            return
        target = player.target(now)
        src = Source.EXTERNAL.value
        why = self.admit(src, now)
        if not why:
            try:
                self._apply(target, src, None)
            except Exception as e:  # e-stop latched, inactive: the trajectory ends here
                why = str(e)
                self.refuse(src, f"trajectory stopped: {e}", "stopped", now)
        if why or player.done(now):
            with self._lock:
                if self.player is player:
                    self.player = None

    def publish_holder(self, now: float, force: bool = False) -> None:
        st = self.gate.status(now)
        shown = (str(st["holder"]), str(st["refused_total"]))
        if force or shown != self._shown:
            self._shown = shown
            self._pub_gate.publish(st)  # a dict: JSON in std_msgs/String on ROS

    def diagnostic(self, now: float) -> dict[str, Any]:
        """The gate's entry for ``/diagnostics``: the holder and the exact refusal totals."""
        st = self.gate.status(now)
        totals = dict(self.gate.log.totals)
        last = self.summaries[-1] if self.summaries else "no refusals"
        return {"name": "arm/gate", "level": 1 if totals else 0,
                "message": f"holder: {st['holder'] or 'none'}; {last}", "hardware_id": "gate",
                "values": {"holder": st["holder"], "refused_total": sum(totals.values()),
                           **{f"count.{k}": v for k, v in sorted(totals.items())}}}




def refusal_code(e: BaseException) -> str:
    """The summary group of a refused command's error."""
    from .safety import EStopLatchedError, NonFiniteCommandError, UnknownJointError, WorkspaceError

    for cls, code in ((UnknownJointError, "unknown_joint"), (NonFiniteCommandError, "non_finite"),
                      (WorkspaceError, "workspace"), (EStopLatchedError, "estop")):
        if isinstance(e, cls):
            return code
    return "unsafe"


def clamped_joints(limits: ArmLimits, target: Mapping[str, float]
                   ) -> list[tuple[str, float, str]]:
    """The joints of a (validated) target outside their limits: (joint, value, window); the
    driver clips them, and the record says so."""
    known = limits.as_dict()
    out = []
    for n, v in target.items():
        lim = known.get(n)
        if lim is not None and not lim.lower <= v <= lim.upper:
            out.append((n, float(v), f"[{lim.lower:.4f}, {lim.upper:.4f}]"))
    return out


__all__ = ["Apply", "GateIO", "clamped_joints", "refusal_code"]
