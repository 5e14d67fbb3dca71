"""arm.safety: the clamp, the e-stop latch and the command watchdog (pure, no I/O)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from solarian_agent.arm.safety import (
    ArmLimits,
    CommandWatchdog,
    EStopLatch,
    EStopLatchedError,
    InvalidTimestepError,
    JointLimit,
    NonFiniteCommandError,
    UnknownJointError,
    UnsafeCommandError,
    clamp_position,
    clamp_target,
    within_limits,
)
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.errors import ConfigError

LIMITS = ArmLimits((JointLimit("a", -1.0, 1.0, 2.0), JointLimit("g", 0.0, 0.06, 0.05)),
                   max_step=0.1)
ROOT = Path(__file__).resolve().parents[2]


def test_clamp_limits_velocity_and_step() -> None:
    cur = {"a": 0.0, "g": 0.0}
    assert clamp_target(LIMITS, cur, {"a": 5.0}, dt=0.01) == {"a": pytest.approx(0.02)}
    assert clamp_target(LIMITS, cur, {"a": 5.0}, dt=1.0) == {"a": pytest.approx(0.1)}  # step
    assert clamp_target(LIMITS, {"a": 0.95}, {"a": 5.0}, dt=1.0) == {"a": 1.0}  # limit
    assert clamp_target(LIMITS, cur, {"a": -0.01}, dt=1.0) == {"a": pytest.approx(-0.01)}
    assert clamp_target(LIMITS, cur, {"a": 0.5}, dt=0.0) == {"a": 0.0}
    assert clamp_target(LIMITS, cur, {"g": 1.0}, dt=0.1) == {"g": pytest.approx(0.005)}
    # a per-command velocity can only lower the limit
    assert clamp_target(LIMITS, cur, {"a": 1.0}, 0.01, max_velocity=1.0)["a"] == \
        pytest.approx(0.01)
    assert clamp_target(LIMITS, cur, {"a": 1.0}, 0.01, max_velocity=99.0)["a"] == \
        pytest.approx(0.02)
    # a joint found outside its window is brought back inside
    assert clamp_target(LIMITS, {"a": 1.5}, {"a": 1.5}, dt=0.01) == {"a": 1.0}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1.0", None, True])
def test_non_finite_values_name_the_joint(bad: object) -> None:
    with pytest.raises(NonFiniteCommandError) as ei:
        clamp_target(LIMITS, {"a": 0.0}, {"a": bad}, dt=0.01)  # type: ignore[dict-item]
    assert ei.value.joint == "a" and "'a'" in str(ei.value)
    assert isinstance(ei.value, UnsafeCommandError) and isinstance(ei.value, ValueError)


def test_unknown_joint_and_bad_dt() -> None:
    with pytest.raises(UnknownJointError, match="'elbow'") as ei:
        clamp_target(LIMITS, {"a": 0.0}, {"a": 0.0, "elbow": 1.0}, dt=0.01)
    assert ei.value.joint == "elbow"
    for dt in (-0.1, math.nan, math.inf):
        with pytest.raises(InvalidTimestepError):
            clamp_target(LIMITS, {"a": 0.0}, {"a": 0.1}, dt=dt)
    with pytest.raises(NonFiniteCommandError, match="current position"):
        clamp_target(LIMITS, {"a": math.nan}, {"a": 0.1}, dt=0.01)
    with pytest.raises(UnsafeCommandError, match="no current position"):
        clamp_target(LIMITS, {}, {"a": 0.1}, dt=0.01)
    assert clamp_position(LIMITS, {"a": 9.0, "g": -1.0}) == {"a": 1.0, "g": 0.0}


@given(
    cur=st.floats(-1.0, 1.0),
    tgt=st.floats(allow_nan=False, allow_infinity=False, width=64),
    dt=st.floats(0.0, 10.0),
)
def test_clamp_property(cur: float, tgt: float, dt: float) -> None:
    out = clamp_target(LIMITS, {"a": cur}, {"a": tgt}, dt)["a"]
    assert -1.0 <= out <= 1.0
    assert abs(out - cur) <= min(2.0 * dt, 0.1) + 1e-12
    assert within_limits(LIMITS, {"a": out})


def test_limits_validation_and_yaml() -> None:
    with pytest.raises(ValueError, match="lower"):
        JointLimit("x", 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="duplicate"):
        ArmLimits((JointLimit("x", 0, 1, 1), JointLimit("x", 0, 1, 1)), 0.1)
    lim = ArmLimits.from_yaml(ROOT / "config" / "arm_so101.yaml")
    assert lim.names == ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex",
                         "wrist_roll", "gripper")
    assert (lim.joint("wrist_roll").lower, lim.joint("wrist_roll").upper) == (-2.74385, 2.84121)
    assert (lim.joint("gripper").lower, lim.joint("gripper").upper) == (-0.174533, 1.74533)
    with pytest.raises(ConfigError, match=r"arm.joints.elbow: missing \['upper'\]"):
        ArmLimits.from_mapping({"joints": {"elbow": {"lower": 0, "max_velocity": 1}}})


def test_estop_latch() -> None:
    latch = EStopLatch()
    assert not latch.tripped
    latch.check()
    assert latch.trip("bumper") is True
    assert latch.trip("second") is False  # the first reason is kept
    assert latch.tripped and latch.reason == "bumper"
    assert latch.reasons == ("bumper", "second")
    with pytest.raises(EStopLatchedError, match="bumper"):
        latch.check()
    assert latch.tripped  # nothing but reset() releases it
    assert latch.reset() is True
    assert not latch.tripped and latch.reason == ""
    assert latch.reset() is False


def test_the_latch_counts_every_trip_keeps_the_last_twenty_and_names_a_blank_reason() -> None:
    latch = EStopLatch()
    assert latch.trip("") is True
    assert latch.reason == "unspecified" and latch.reasons == ("unspecified",)
    with pytest.raises(EStopLatchedError) as ei:
        latch.check()
    assert ei.value.reason == "unspecified"
    assert str(ei.value) == ("e-stop is latched (unspecified); reset it before commanding "
                             "motion")
    for i in range(24):
        latch.trip(f"t{i}")
    assert latch.trip_count == 25 and latch.reason == "unspecified"
    assert latch.reasons == tuple(f"t{i}" for i in range(4, 24))  # the last 20


def test_an_unknown_joint_is_named_with_the_arm_s_joints() -> None:
    with pytest.raises(UnknownJointError) as ei:
        LIMITS.joint("elbow")
    assert str(ei.value) == f"unknown joint 'elbow'; the arm has {list(LIMITS.names)}"
    assert ei.value.joint == "elbow"
    assert LIMITS.joint("a").name == "a"


def test_watchdog_with_fake_clock() -> None:
    clock = FakeClock()
    wd = CommandWatchdog(0.5, clock)
    assert wd.expired() and wd.age() is None  # no command yet
    wd.feed()
    clock.advance(0.4)
    assert not wd.expired()
    clock.advance(0.2)
    assert wd.expired() and wd.age() == pytest.approx(0.6)
    wd.feed()
    assert not wd.expired()
    wd.clear()
    assert wd.expired()
    with pytest.raises(ValueError):
        CommandWatchdog(0.0, clock)


# ------------------------------------------------------------------------ exact reasons and edges

J = {"lower": -1.0, "upper": 1.0, "max_velocity": 2.0}


@pytest.mark.parametrize("data, message", [
    ([1], "cal.arm: expected a mapping, got list"),
    ({}, "cal.arm.joints: expected a non-empty mapping of joints"),
    ({"joints": {}}, "cal.arm.joints: expected a non-empty mapping of joints"),
    ({"joints": [1]}, "cal.arm.joints: expected a non-empty mapping of joints"),
    ({"joints": {"a": 3}}, "cal.arm.joints.a: expected a mapping, got int"),
    ({"joints": {"a": {"lower": 0}}}, "cal.arm.joints.a: missing ['upper', 'max_velocity']"),
    ({"joints": {"a": {**J, "lower": "low"}}},
     "cal.arm.joints.a: could not convert string to float: 'low'"),
    ({"joints": {"a": {**J, "lower": 2.0}}},
     "cal.arm.joints.a: joint 'a': lower (2.0) must be below upper (1.0)"),
    ({"joints": {"a": J}, "max_step": 0},
     "cal.arm.max_step: ArmLimits: max_step must be a finite number > 0, got 0.0"),
    ({"joints": {"a": J}, "max_step": "big"},
     "cal.arm.max_step: could not convert string to float: 'big'"),
])
def test_limits_config_errors_name_the_path_and_the_reason(data, message) -> None:
    with pytest.raises(ConfigError) as e:
        ArmLimits.from_mapping(data, where="cal.arm")
    assert str(e.value) == message


def test_limits_from_a_mapping_and_a_yaml_file(tmp_path: Path) -> None:
    lim = ArmLimits.from_mapping({"joints": {"a": J, "b": {**J, "upper": 3}}})
    assert lim.max_step == 0.1 and lim.names == ("a", "b")
    assert lim.joint("b").upper == 3.0 and lim.joint("a").max_velocity == 2.0
    with pytest.raises(ConfigError) as e:
        ArmLimits.from_mapping([])
    assert str(e.value) == "arm: expected a mapping, got list"
    good = tmp_path / "arm.yaml"
    good.write_text("arm:\n  max_step: 0.2\n  joints:\n    a: {lower: -1, upper: 1, "
                    "max_velocity: 2}\n    é: {lower: 0, upper: 1, max_velocity: 1}\n",
                    encoding="utf-8")
    lim = ArmLimits.from_yaml(good)
    assert lim.max_step == 0.2 and lim.names == ("a", "é")
    bad = tmp_path / "bad.yaml"
    bad.write_text("joints: {}\n")
    with pytest.raises(ConfigError) as e:
        ArmLimits.from_yaml(bad)
    assert str(e.value) == f"{bad}: expected a top-level 'arm:' block"
    bad.write_text("- arm\n")
    with pytest.raises(ConfigError, match="expected a top-level 'arm:' block"):
        ArmLimits.from_yaml(bad)
    bad.write_text("arm:\n  joints: {}\n")
    with pytest.raises(ConfigError) as e:
        ArmLimits.from_yaml(bad)
    assert str(e.value) == f"{bad}:arm.joints: expected a non-empty mapping of joints"


def test_within_limits_at_its_edges() -> None:
    lim = ArmLimits.from_mapping({"joints": {"a": J, "b": J}})
    assert within_limits(lim, {"a": -1.0, "b": 1.0})  # the window is closed
    assert within_limits(lim, {})
    assert not within_limits(lim, {"a": -1.001})
    assert not within_limits(lim, {"b": 1.001})
    assert within_limits(lim, {"a": -1.001, "b": 1.001}, tol=0.002)
    assert not within_limits(lim, {"a": -1.003}, tol=0.002)
    assert not within_limits(lim, {"b": 1.003}, tol=0.002)
    assert not within_limits(lim, {"a": 0.0, "c": 0.0})  # an unknown joint
    assert not within_limits(lim, {"a": math.nan})
    assert not within_limits(lim, {"a": 0.0, "b": math.inf})


@pytest.mark.parametrize("data, message", [
    ([1, 2], "ws: expected a mapping with x, y, z, got [1, 2]"),
    ({"x": [0, 1], "w": [0, 1]}, "ws.w: unknown key; allowed keys: x, y, z"),
    ({"y": [0]}, "ws.y: must be [lo, hi], got [0]"),
    ({"z": 5}, "ws.z: must be [lo, hi], got 5"),
    ({"x": [1, 0]}, "ws: workspace.x must be [lo, hi] with lo < hi, got (1.0, 0.0)"),
])
def test_workspace_config_errors_name_the_path_and_the_reason(data, message) -> None:
    from solarian_agent.arm.safety import Workspace
    with pytest.raises(ConfigError) as e:
        Workspace.from_mapping(data, where="ws")
    assert str(e.value) == message


def test_workspace_from_a_mapping_keeps_the_defaults_it_is_not_given() -> None:
    from solarian_agent.arm.safety import Workspace
    d = Workspace()
    w = Workspace.from_mapping({"z": [0.01, 0.4]})
    assert (w.x, w.y, w.z) == (d.x, d.y, (0.01, 0.4))
    w = Workspace.from_mapping({"x": (-0.1, 0.2), "y": [-0.3, 0.3], "z": [0, 1]})
    assert (w.x, w.y, w.z) == ((-0.1, 0.2), (-0.3, 0.3), (0.0, 1.0))
    with pytest.raises(ConfigError) as e:
        Workspace.from_mapping("box")
    assert str(e.value) == "workspace: expected a mapping with x, y, z, got 'box'"


def test_bad_dt_and_max_velocity_are_refused_naming_the_value() -> None:
    for dt in (-0.1, math.nan, math.inf, "0.1", True):
        with pytest.raises(InvalidTimestepError) as ei:
            clamp_target(LIMITS, {"a": 0.0}, {"a": 0.1}, dt=dt)  # type: ignore[arg-type]
        assert str(ei.value) == f"dt must be a finite number >= 0, got {dt!r}"
        assert ei.value.value is dt
    for v in (-0.5, math.nan, math.inf):
        with pytest.raises(UnsafeCommandError) as ei:
            clamp_target(LIMITS, {"a": 0.0}, {"a": 0.1}, dt=0.01, max_velocity=v)
        assert str(ei.value) == f"max_velocity must be a finite number >= 0, got {v!r}"
        assert ei.value.value is v and ei.value.joint == ""


def test_a_max_velocity_of_zero_reads_as_no_override_and_a_small_one_lowers_the_speed() -> None:
    """0 is a message's unset velocity field: the joint's own limit applies (the sim and the
    servo controller read it so too); any positive value can only lower the limit."""
    cur = {"a": 0.0}
    assert clamp_target(LIMITS, cur, {"a": 1.0}, 0.01, max_velocity=0.0)["a"] == \
        pytest.approx(0.02)
    assert clamp_target(LIMITS, cur, {"a": 1.0}, 0.01, max_velocity=0.5)["a"] == \
        pytest.approx(0.005)


def test_a_missing_or_bad_current_position_names_the_joint_and_the_value() -> None:
    with pytest.raises(UnsafeCommandError) as ei:
        clamp_target(LIMITS, {"g": 0.0}, {"a": 0.1}, dt=0.01)
    assert str(ei.value) == "joint 'a': no current position known, cannot limit its speed"
    assert ei.value.joint == "a"
    with pytest.raises(NonFiniteCommandError) as ei:
        clamp_target(LIMITS, {"a": math.inf}, {"a": 0.1}, dt=0.01)
    assert str(ei.value) == "joint 'a': current position is inf, not a finite number"
    assert (ei.value.joint, ei.value.value) == ("a", math.inf)
    with pytest.raises(NonFiniteCommandError) as ei:
        clamp_target(LIMITS, {"a": "0"}, {"a": 0.1}, dt=0.01)  # type: ignore[dict-item]
    assert str(ei.value) == "joint 'a': current position must be a number, got str '0'"
    assert (ei.value.joint, ei.value.value) == ("a", "0")


def test_the_workspace_box_measures_how_far_out_a_point_is_on_every_side() -> None:
    from solarian_agent.arm.safety import Workspace

    box = Workspace(x=(0.0, 1.0), y=(-1.0, 1.0), z=(0.1, 0.5))
    assert box.excess((0.5, 0.0, 0.3)) == 0.0
    assert box.excess((0.0, 1.0, 0.1)) == 0.0  # on the faces: inside
    assert box.excess((-0.2, 0.0, 0.3)) == pytest.approx(0.2)  # below x's lo
    assert box.excess((1.3, 0.0, 0.3)) == pytest.approx(0.3)  # above x's hi
    assert box.excess((0.5, 0.0, 0.0)) == pytest.approx(0.1)  # under the table
    assert box.excess((1.2, -1.5, 0.3)) == pytest.approx(0.5)  # the worst axis
    with pytest.raises(ValueError):
        box.excess((0.5, 0.0))  # a point of two coordinates is not a point
    with pytest.raises(ValueError):
        box.violation((0.5, 0.0))
    assert box.violation((0.0, 1.0, 0.5)) == ""
    assert box.violation((-0.2, 0.0, 0.6)) == ("tip x=-0.200 m outside [0, 1]; "
                                               "tip z=0.600 m outside [0.1, 0.5]")
    with pytest.raises(ValueError, match=r"workspace.z must be \[lo, hi\] with lo < hi"):
        Workspace(z=(0.2, 0.2))


def test_the_workspace_guard_refuses_targets_and_holds_steps_that_go_further_out() -> None:
    from solarian_agent.arm.safety import Workspace, WorkspaceError, WorkspaceGuard

    # the tip's x is joint a, its z is joint g (a 2-joint stand-in for forward kinematics)
    guard = WorkspaceGuard(Workspace(x=(-0.5, 0.5), y=(-1.0, 1.0), z=(0.01, 0.05)),
                           lambda q: (q[0], 0.0, q[1]), ("a", "g"))
    assert guard.rejected == 0
    guard.check_target({"a": 0.4}, {"a": 0.0, "g": 0.03})
    for n in (1, 2):
        with pytest.raises(WorkspaceError) as ei:
            guard.check_target({"a": 0.7}, {"a": 0.0, "g": 0.03})
        assert str(ei.value) == "target refused: tip x=0.700 m outside [-0.5, 0.5]"
        assert guard.rejected == n
    inside = {"a": 0.0, "g": 0.03}
    assert guard.safe_step(inside, {"a": 0.5}) == {"a": 0.5}  # on the face: followed
    # a step that would leave the box is held where the arm is, for the stepped joints
    assert guard.safe_step(inside, {"a": 0.6}) == {"a": 0.0}
    assert guard.rejected == 3
    assert guard.safe_step(inside, {"a": 0.6, "g": 0.0}) == {"a": 0.0, "g": 0.03}
    assert guard.rejected == 4
    # an arm already outside may move back in, or stay as far out, never further
    out = {"a": 0.7, "g": 0.03}
    assert guard.safe_step(out, {"a": 0.65}) == {"a": 0.65}
    assert guard.safe_step(out, {"a": 0.7}) == {"a": 0.7}
    assert guard.safe_step(out, {"a": 0.75}) == {"a": 0.7}
    assert guard.rejected == 5


def test_a_fresh_latch_is_untripped_with_no_reason() -> None:
    latch = EStopLatch()
    assert latch.tripped is False and latch.reason == "" and latch.reasons == ()
    assert latch.trip_count == 0
    latch.check()


def test_the_watchdog_expires_only_after_its_timeout_and_refuses_a_bad_one() -> None:
    clock = FakeClock()
    wd = CommandWatchdog(0.5, clock)
    wd.feed()
    clock.advance(0.5)
    assert not wd.expired()  # exactly the timeout: still fresh
    clock.advance(1e-6)
    assert wd.expired()
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError) as ei:
            CommandWatchdog(bad, clock)
        assert str(ei.value) == f"CommandWatchdog timeout_s must be > 0, got {bad!r}"


@pytest.mark.parametrize("kw, message", [
    ({"lower": math.nan}, "joint 'j': lower must be a finite number, got nan"),
    ({"lower": True}, "joint 'j': lower must be a finite number, got True"),
    ({"upper": "1"}, "joint 'j': upper must be a finite number, got '1'"),
    ({"max_velocity": math.inf}, "joint 'j': max_velocity must be a finite number, got inf"),
    ({"lower": 1.0, "upper": 1.0}, "joint 'j': lower (1.0) must be below upper (1.0)"),
    ({"max_velocity": 0.0}, "joint 'j': max_velocity must be > 0, got 0.0"),
    ({"max_velocity": -1.0}, "joint 'j': max_velocity must be > 0, got -1.0"),
])
def test_a_joint_limit_refuses_a_bad_value_naming_the_joint_field_and_value(
        kw: dict, message: str) -> None:
    with pytest.raises(ValueError) as ei:
        JointLimit("j", **{"lower": -1.0, "upper": 1.0, "max_velocity": 1.0, **kw})
    assert str(ei.value) == message


def test_arm_limits_need_a_joint() -> None:
    with pytest.raises(ValueError) as ei:
        ArmLimits((), max_step=0.1)
    assert str(ei.value) == "ArmLimits needs at least one joint"


def test_a_bad_target_names_the_joint_the_value_and_what_was_wrong() -> None:
    from solarian_agent.arm.safety import validate_target

    with pytest.raises(UnknownJointError) as ei:
        validate_target(LIMITS, {"elbow": 0.5})
    assert str(ei.value) == "unknown joint 'elbow' in command; the arm has ['a', 'g']"
    assert (ei.value.joint, ei.value.value) == ("elbow", 0.5)
    with pytest.raises(NonFiniteCommandError) as ei:
        validate_target(LIMITS, {"a": math.nan})
    assert str(ei.value) == "joint 'a': target is nan, not a finite number"
    assert ei.value.joint == "a" and math.isnan(ei.value.value)
    with pytest.raises(NonFiniteCommandError) as ei:
        validate_target(LIMITS, {"a": None})
    assert str(ei.value) == "joint 'a': target must be a number, got NoneType None"
    assert ei.value.value is None and ei.value.joint == "a"
    with pytest.raises(NonFiniteCommandError) as ei:
        validate_target(LIMITS, {"a": "1.0"})
    assert ei.value.value == "1.0"
    assert validate_target(LIMITS, {"a": 1, "g": 0.5}) == {"a": 1.0, "g": 0.5}
