"""The cv monitor on the live simulator: the embedded system's pick skill, watched through the
rendered wrist camera by the monitor built from config/controller.yaml."""

import pytest

from solarian_agent.core import names
from solarian_agent.core.messages import SkillGoal
from solarian_agent.perception.cv_monitor import CvVisionBackend

system = pytest.importorskip("solarian_agent.system")
faults = pytest.importorskip("solarian_agent.sim.faults")
build_monitor = system.build_monitor


def pick(grasp_fail_p):
    s = system.build_sim_system(seed=1, with_monitor=False,
                                faults=faults.FaultConfig(grasp_fail_p=grasp_fail_p))
    eng = build_monitor(bus=s.bus, clock=s.clock, config=s.config, trackers=s.trackers,
                        readings=s.arm.readings)
    assert isinstance(eng.backend, CvVisionBackend) and "wrist" in eng.cameras
    s.runtime.add("monitor", lambda dt: eng.tick())
    cup = s.world.objects["red_cup"]
    u, v = s.sim.renderer.project((cup.x, cup.y, 0.0))
    h = s.bus.send_goal(names.skill_action("pick_object"),
                        SkillGoal("pick_object", {"point": [u, v]}, s.executor.generation, "a1"))
    assert s.run_until(lambda: h.done, 30)
    answers = [e["answers"]["progress"] for e in eng.recent
               if e["kind"] == "monitor_tick" and "progress" in e["answers"]]
    s.shutdown()
    return answers


def test_a_successful_pick_is_seen_holding():
    answers = pick(0.0)
    assert any(a["value"] == "holding" and a["probability"] >= 0.8 for a in answers), answers


def test_a_failed_grasp_is_seen_failing_and_never_holding():
    answers = pick(1.0)
    assert any(a["value"] == "failed" and a["probability"] >= 0.8 for a in answers), answers
    assert not any(a["value"] == "holding" and a["probability"] >= 0.8 for a in answers)
