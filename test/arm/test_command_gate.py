"""The command gate on its own: one holder by priority and lease, named refusals, the refusal
record with exact-count summaries, config validation naming the YAML path; and the whole-
trajectory check and timed playback."""

from __future__ import annotations

import math

import pytest

from solarian_agent.arm.gate import (
    ArmHeldError,
    CommandGate,
    GateConfig,
    Refusal,
    RefusalLog,
    UnknownSourceError,
)
from solarian_agent.arm.safety import ArmLimits, JointLimit
from solarian_agent.arm.trajectory import (
    TrajectoryPlayer,
    TrajectoryRefusedError,
    check_trajectory,
    trajectory_from_lists,
)
from solarian_agent.core.errors import ConfigError


def test_higher_priority_takes_at_once_lower_is_refused_until_the_lease_lapses():
    g = CommandGate()  # operator 3 s, others 1 s
    assert g.admit("agent", 0.0).taken_from == ""
    assert g.holder(0.5) == "agent"
    taken = g.admit("operator", 0.5)
    assert taken.taken_from == "agent"  # the caller announces the takeover
    with pytest.raises(ArmHeldError, match="held by operator") as e:
        g.admit("agent", 1.0)
    assert e.value.holder == "operator" and e.value.lease_left_s == pytest.approx(2.5)
    with pytest.raises(ArmHeldError):
        g.admit("external", 3.49)
    assert g.holder(3.49) == "operator"
    # no operator command for 3 s: the lease lapsed, the agent may take the arm again
    assert g.holder(3.5) == ""
    assert g.admit("agent", 3.5).taken_from == ""
    # a command renews the holder's lease
    g.admit("agent", 4.4)
    with pytest.raises(ArmHeldError):
        g.admit("policy", 5.3)
    assert g.admit("policy", 5.4).source == "policy"


def test_release_hands_the_arm_back_at_once():
    g = CommandGate()
    g.admit("operator", 0.0)
    assert not g.release("agent", 0.1)  # only the holder releases
    assert g.release("operator", 0.1)
    assert g.admit("policy", 0.2).taken_from == ""


def test_unknown_source_is_refused_by_name():
    g = CommandGate()
    with pytest.raises(UnknownSourceError, match="'teleop'"):
        g.admit("teleop", 0.0)
    assert g.holder(0.0) == ""
    assert g.log.totals == {"refused teleop unknown_source": 1}


def test_refusals_preemptions_and_the_status():
    g = CommandGate()
    g.admit("agent", 0.0)
    g.admit("operator", 0.1)
    for t in (0.2, 0.3):
        with pytest.raises(ArmHeldError):
            g.admit("agent", t)
    assert g.log.totals == {"preempted agent preempted": 1, "refused agent held": 2}
    st = g.status(0.4)
    assert st["holder"] == "operator" and st["refused_total"] == 3
    assert [r["kind"] for r in st["last_refusals"]] == ["preempted", "refused", "refused"]
    assert st["last_refusals"][-1]["reason"].startswith("held by operator")


def test_a_flood_is_summarised_once_per_period_with_the_exact_count():
    log = RefusalLog(period_s=1.0, recent=20)
    lines = []
    n = 10_000
    for i in range(n):
        t = i * 0.0007  # 10,000 refusals in 7 s
        log.add(Refusal(t, "external", "point 1: elbow_flex outside", "limit",
                        joint="elbow_flex", value=3.0, limit="[-1.69, 1.69]"))
        s = log.summary_due(t)
        if s is not None:
            lines.append(s)
    last = log.summary_due(7.0, force=True)
    if last is not None:
        lines.append(last)
    assert sum(s.total for s in lines) == n  # nothing lost
    assert 6 <= len(lines) <= 8  # one a second, not one a command
    assert all(set(s.counts) == {"refused external limit"} for s in lines)
    assert "refused external limit: " in lines[0].line()
    assert len(log.recent) == 20 and log.total == n
    assert log.summary_due(100.0) is None  # nothing pending


@pytest.mark.parametrize("data, path", [
    ({"priority": ["operator", "operator"]}, "arm.yaml: gate.priority"),
    ({"lease_s": {"agent": 0}}, "arm.yaml: gate.lease_s.agent"),
    ({"lease_s": {"agent": math.inf}}, "arm.yaml: gate.lease_s.agent"),
    ({"summary_period_s": 0}, "arm.yaml: gate.summary_period_s"),
    ({"recent": 0}, "arm.yaml: gate.recent"),
    ({"priority": ["operator", "robot"]}, "arm.yaml: gate.lease_s"),
    ({"leases": {}}, "arm.yaml: gate"),
])
def test_config_is_validated_naming_the_yaml_path(data, path):
    with pytest.raises(ConfigError) as e:
        GateConfig.from_mapping(data, "arm.yaml: gate")
    assert e.value.path == path


def test_the_shipped_config_has_the_issue_order():
    from solarian_agent.ros.node_config import share_dir

    cfg = GateConfig.from_yaml(share_dir() / "config" / "arm_so101.yaml")
    assert cfg.priority == ("operator", "external", "agent", "policy")
    assert cfg.lease("operator") > cfg.lease("agent") > 0
    assert GateConfig.shipped() == cfg  # what the simulators use


LIMITS = ArmLimits((JointLimit("a", -1.0, 1.0, 2.0), JointLimit("b", -0.5, 0.5, 2.0)), 0.1)


def test_one_point_out_of_limits_refuses_the_whole_trajectory():
    traj = trajectory_from_lists(("a", "b"), [(0.5, (0.1, 0.1)), (1.0, (0.2, 0.7)),
                                              (1.5, (0.0, 0.0))])
    with pytest.raises(TrajectoryRefusedError) as e:
        check_trajectory(traj, LIMITS, None, {})
    assert (e.value.code, e.value.point, e.value.joint, e.value.value) == ("limit", 1, "b", 0.7)
    assert "point 1: b = 0.7000 outside its limits [-0.5000, 0.5000]" in str(e.value)


@pytest.mark.parametrize("names, points, code", [
    (("a", "z"), [(1.0, (0.0, 0.0))], "unknown_joint"),
    (("a", "a"), [(1.0, (0.0, 0.0))], "malformed"),
    (("a",), [], "malformed"),
    (("a",), [(1.0, (0.0, 0.0))], "malformed"),
    (("a",), [(1.0, (0.0,)), (1.0, (0.1,))], "malformed"),  # time does not advance
    (("a",), [(math.nan, (0.0,))], "malformed"),
    (("a",), [(1.0, (math.inf,))], "non_finite"),
])
def test_malformed_trajectories_are_refused(names, points, code):
    with pytest.raises(TrajectoryRefusedError) as e:
        check_trajectory(trajectory_from_lists(names, points), LIMITS, None, {})
    assert e.value.code == code


def test_playback_honours_time_from_start():
    traj = trajectory_from_lists(("a",), [(1.0, (0.5,)), (3.0, (-0.5,))])
    check_trajectory(traj, LIMITS, None, {})
    p = TrajectoryPlayer(traj, {"a": 0.0}, now=10.0)
    assert p.target(10.0)["a"] == pytest.approx(0.0)
    assert p.target(10.5)["a"] == pytest.approx(0.25)
    assert p.target(11.0)["a"] == pytest.approx(0.5)
    assert p.target(12.0)["a"] == pytest.approx(0.0)
    assert not p.done(12.9) and p.done(13.0)
    assert p.target(20.0)["a"] == pytest.approx(-0.5)


def test_only_the_operators_front_ends_may_reset_the_estop_or_answer_approvals():
    """The e-stop is released only by the operator: of every node of the graph, only the
    operator's front ends (panel, chat) call estop_reset (or skills/approve); the planner,
    the skills, the monitor and the drivers have no client for them."""
    import inspect

    from solarian_agent.core import names
    from solarian_agent.rosmsg import graph

    callers = {}
    for exe, build in graph.SPEC_BUILDERS.items():
        params = inspect.signature(build).parameters
        spec = build(*([()] * len([p for p in params.values()
                                   if p.default is inspect.Parameter.empty])))
        for e in spec.of("client"):
            callers.setdefault(e.name, set()).add(exe)
    assert callers[names.ESTOP_RESET] == {"chat", "panel"}
    assert callers[names.SKILL_APPROVE] == {"chat", "panel"}
