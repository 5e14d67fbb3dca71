"""Monitor rules: threshold, consecutive, after_s, then, escalate once, questions
without when, and the start-up validation of questions and rules."""

import pytest
from monitor_helpers import PROGRESS, FakeBackend, Rig, choice, config, grip_tool

from solarian_agent.core.monitor import (
    MonitorConfigError,
    MonitorEngine,
    RuleState,
    check_catalogue,
    parse_questions,
)
from solarian_agent.perception.vision import MonitorAnswer


def progress(*rules):
    return [{**PROGRESS, "when": list(rules)}]


def run(rig, answers):
    """Start a1, keep its first frame, then one tick per scripted answer; the verdicts of each
    judged tick."""
    rig.backend.script = [{"progress": a} for a in answers]
    rig.start()
    rig.tick()  # the first frame is only kept
    out = []
    for _ in answers:
        rig.tick()
        out.append(rig.verdicts())
    return out


def test_threshold_is_a_confidence_floor():
    rig = Rig(progress({"do": "finish", "value": "holding", "threshold": 0.8}))
    ticks = run(rig, [choice("holding", 0.7), choice("holding", 0.85)])
    # the unsure tick answered, but decided nothing
    assert [v.decision for v in ticks[0]] == [""]
    assert ticks[0][0].value == "holding" and ticks[0][0].probability == 0.7
    assert [v.decision for v in ticks[1]] == ["finish"]


def test_without_threshold_any_answer_counts():
    rig = Rig(progress({"do": "finish", "value": "holding"}))
    ticks = run(rig, [choice("holding", 0.3)])
    assert ticks[0][0].decision == "finish"


def test_consecutive_needs_a_run_and_a_different_answer_breaks_it():
    rig = Rig(progress({"do": "escalate", "value": "failed", "threshold": 0.8,
                        "consecutive": 2}))
    ticks = run(rig, [choice("failed", 0.9), choice("approaching", 0.9),
                      choice("failed", 0.9), choice("failed", 0.9)])
    assert [[v.decision for v in t] for t in ticks] == [[""], [""], [""], ["escalate"]]
    assert "2 ticks in a row" in ticks[3][0].reason


def test_a_tick_below_the_floor_does_nothing_and_the_next_decides():
    rig = Rig(progress({"do": "escalate", "value": "failed", "threshold": 0.8,
                        "consecutive": 2}))
    ticks = run(rig, [choice("failed", 0.9), choice("approaching", 0.5),
                      choice("failed", 0.95)])
    # the unsure "approaching" neither counted nor broke the run
    assert [t[0].decision for t in ticks] == ["", "", "escalate"]


def test_after_s_keeps_a_rule_from_counting_early_ticks():
    rig = Rig(progress({"do": "fail", "value": "failed", "threshold": 0.8, "after_s": 6}))
    # judged ticks at 3.0, 4.5, 6.0 s into the action
    ticks = run(rig, [choice("failed", 0.99)] * 3)
    assert [t[0].decision for t in ticks] == ["", "", "fail"]


def test_after_s_with_consecutive_counts_only_from_after_s():
    st = RuleState(parse_questions("t", progress(
        {"do": "escalate", "value": "failed", "consecutive": 2, "after_s": 6}))[0])
    a = MonitorAnswer("progress", "failed", 0.9)
    assert st.feed(a, 4.5) == [] and st.feed(a, 6.0) == []
    assert [r.do for r, _ in st.feed(a, 7.5)] == ["escalate"]


def test_finish_carries_then_and_ends_judging():
    rig = Rig(progress({"do": "finish", "value": "holding", "threshold": 0.8,
                        "then": "home_holding"}))
    ticks = run(rig, [choice("holding", 0.9)])
    v = ticks[0][0]
    assert (v.decision, v.then, v.source, v.generation) == ("finish", "home_holding",
                                                            "monitor", 1)
    calls = len(rig.backend.requests)
    rig.tick()
    rig.tick()
    assert len(rig.backend.requests) == calls  # a concluded action is not asked again
    assert rig.verdicts() == []


def test_fail_rule_with_then():
    rig = Rig(progress({"do": "fail", "value": "failed", "then": "home_holding"}))
    v = run(rig, [choice("failed", 0.9)])[0][0]
    assert (v.decision, v.then) == ("fail", "home_holding")


def test_escalate_fires_once_per_question():
    rig = Rig(progress({"do": "escalate", "value": "failed", "threshold": 0.8}))
    ticks = run(rig, [choice("failed", 0.9)] * 4)
    assert [t[0].decision for t in ticks] == ["escalate", "", "", ""]
    # the action keeps running and keeps being asked
    assert len(rig.backend.requests) == 4


def test_question_without_when_is_only_shown():
    rig = Rig([{"name": "released", "type": "predicate", "instructions": "let go?"}])
    rig.backend.script = [{"released": 0.99}, {"released": 0.01}]
    rig.start()
    rig.tick()
    rig.tick()
    v1 = rig.verdicts()
    rig.tick()
    v2 = rig.verdicts()
    assert [(v.question, v.value, v.decision) for v in v1] == [("released", "true", "")]
    assert v1[0].probability == pytest.approx(0.99)
    # a predicate answered 0.01 is "false" with probability 0.99
    assert [(v.value, round(v.probability, 2), v.decision) for v in v2] == [("false", 0.99,
                                                                               "")]


def test_predicate_rule_on_false():
    rig = Rig([{"name": "held", "type": "predicate", "when": {
        "do": "fail", "value": False, "threshold": 0.8}}])
    rig.backend.script = [{"held": 0.5}, {"held": 0.1}]
    rig.start()
    rig.tick()
    rig.tick()
    assert [v.decision for v in rig.verdicts()] == [""]  # p=0.5: below the floor either way
    rig.tick()
    assert [v.decision for v in rig.verdicts()] == ["fail"]


def test_first_rule_in_order_wins_and_escalations_come_with_it():
    rig = Rig([
        {**PROGRESS, "when": [{"do": "escalate", "value": "holding"}]},
        {"name": "held", "type": "predicate", "when": {"do": "finish"}},
        {"name": "dropped", "type": "predicate", "when": {"do": "fail"}},
    ])
    rig.backend.script = [{"progress": choice("holding", 0.9), "held": 0.9, "dropped": 0.9}]
    rig.start()
    rig.tick()
    rig.tick()
    vs = rig.verdicts()
    assert [(v.question, v.decision) for v in vs] == [("dropped", ""), ("progress", "escalate"),
                                                      ("held", "finish")]


# -- start-up validation -----------------------------------------------------------------------

def test_then_naming_no_tool_fails_at_start_up():
    cat = [grip_tool(progress({"do": "finish", "value": "holding", "then": "go_home"}))]
    with pytest.raises(MonitorConfigError) as e:
        check_catalogue(cat)
    assert "skills.grip.monitor[0].when[0].then" in str(e.value) and "go_home" in str(e.value)
    rig_bus = Rig([])  # an engine built with such a catalogue refuses to start
    with pytest.raises(MonitorConfigError):
        MonitorEngine(rig_bus.bus, rig_bus.clock, config(), FakeBackend(), cameras=["cam"],
                      catalogue=cat, node="m2")


def test_start_fetches_the_catalogue_and_validates():
    rig = Rig([])
    rig.catalogue = [grip_tool(progress({"do": "fail", "value": "failed", "then": "nope"}))]
    eng = MonitorEngine(rig.bus, rig.clock, config(), FakeBackend(), cameras=["cam"])
    with pytest.raises(MonitorConfigError, match="then"):
        eng.start()


@pytest.mark.parametrize("rule,where", [
    ({"do": "stop", "value": "holding"}, "do"),
    ({"do": "finish", "value": "held"}, "value"),
    ({"do": "finish", "value": "holding", "threshold": 1.5}, "threshold"),
    ({"do": "finish", "value": "holding", "consecutive": 0}, "consecutive"),
    ({"do": "finish", "value": "holding", "after_s": -1}, "after_s"),
    ({"do": "escalate", "value": "holding", "then": "carry"}, "then"),
    ({"do": "finish", "value": "holding", "until": 3}, "until"),
])
def test_bad_rules_are_named(rule, where):
    with pytest.raises(MonitorConfigError) as e:
        parse_questions("grip", progress(rule), {"carry"})
    assert f"skills.grip.monitor[0].when[0].{where}" in str(e.value)


def test_bad_questions_are_named():
    with pytest.raises(MonitorConfigError, match=r"monitor\[0\]"):
        parse_questions("grip", [{"name": "x", "type": "choice", "choices": {"a": ""}}])
    with pytest.raises(MonitorConfigError, match="type"):
        parse_questions("grip", [{"name": "x", "type": "number"}])
    with pytest.raises(MonitorConfigError, match="twice"):
        parse_questions("grip", [{"name": "x"}, {"name": "x"}])
    # a single rule need not be a list
    (q,) = parse_questions("grip", [{"name": "x", "when": {"do": "finish"}}])
    assert q.rules[0].value == "true"


def test_build_monitor_from_the_agent_config():
    from solarian_agent.core.config import load_agent_config
    from solarian_agent.perception.cv_monitor import CvVisionBackend
    from solarian_agent.system import build_monitor

    rig = Rig(progress({"do": "finish", "value": "holding"}))
    cfg = load_agent_config({"agent": {"monitor": {
        "provider": "cv", "close_ups": {"wrist": [0, 0.5, 1, 1]}}}})
    eng = build_monitor(bus=rig.bus, clock=rig.clock, config=cfg)
    assert isinstance(eng.backend, CvVisionBackend) and eng.cameras == ["wrist"]
    assert build_monitor(bus=rig.bus, clock=rig.clock,
                         config=load_agent_config({"agent": {"monitor": None}})) is None
    rig.catalogue = [grip_tool(progress({"do": "finish", "value": "holding", "then": "x"}))]
    with pytest.raises(MonitorConfigError, match="names no tool"):
        build_monitor(bus=rig.bus, clock=rig.clock, config=cfg)


# ------------------------------------------------------------------------------ exact reasons

@pytest.mark.parametrize("rule, message", [
    ("finish", "skills.grip.monitor[0].when[0]: a rule must be a mapping, got str"),
    ({"do": "finish", "value": "holding", "until": 3},
     "skills.grip.monitor[0].when[0].until: unknown key; allowed: after_s, consecutive, do, "
     "then, threshold, value"),
    ({"do": "stop", "value": "holding"},
     "skills.grip.monitor[0].when[0].do: must be one of finish, fail, escalate, got 'stop'"),
    ({"do": "finish", "value": "held"},
     "skills.grip.monitor[0].when[0].value: must be one of "
     + ", ".join(PROGRESS["choices"]) + ", got 'held'"),
    ({"do": "finish", "value": "holding", "threshold": 1.5},
     "skills.grip.monitor[0].when[0].threshold: must be a number from 0 to 1, got 1.5"),
    ({"do": "finish", "value": "holding", "threshold": True},
     "skills.grip.monitor[0].when[0].threshold: must be a number from 0 to 1, got True"),
    ({"do": "finish", "value": "holding", "consecutive": 0},
     "skills.grip.monitor[0].when[0].consecutive: must be an integer >= 1, got 0"),
    ({"do": "finish", "value": "holding", "consecutive": True},
     "skills.grip.monitor[0].when[0].consecutive: must be an integer >= 1, got True"),
    ({"do": "finish", "value": "holding", "consecutive": 2.0},
     "skills.grip.monitor[0].when[0].consecutive: must be an integer >= 1, got 2.0"),
    ({"do": "finish", "value": "holding", "after_s": -1},
     "skills.grip.monitor[0].when[0].after_s: must be a number >= 0, got -1"),
    ({"do": "finish", "value": "holding", "then": 3},
     "skills.grip.monitor[0].when[0].then: must name a tool, got 3"),
    ({"do": "escalate", "value": "holding", "then": "carry"},
     "skills.grip.monitor[0].when[0].then: only a finish or fail rule starts a tool "
     "(escalate leaves the action running)"),
    ({"do": "finish", "value": "holding", "then": "jump"},
     "skills.grip.monitor[0].when[0].then: names no tool: 'jump'; tools: carry, place"),
])
def test_bad_rules_say_exactly_what_and_where(rule, message):
    with pytest.raises(MonitorConfigError) as e:
        parse_questions("grip", progress(rule), {"carry", "place"})
    assert str(e.value) == message


def test_rule_limits_are_inclusive_and_the_defaults():
    (q,) = parse_questions("grip", progress(
        {"do": "finish", "value": "holding", "threshold": 0},
        {"do": "fail", "value": "holding", "threshold": 1, "consecutive": 3, "after_s": 0,
         "then": "carry"},
        {"do": "escalate", "value": "holding"}), {"carry"})
    assert [r.as_dict() for r in q.rules] == [
        {"do": "finish", "value": "holding", "threshold": 0.0},
        {"do": "fail", "value": "holding", "threshold": 1.0, "consecutive": 3,
         "then": "carry"},
        {"do": "escalate", "value": "holding"}]
    r = q.rules[2]
    assert (r.threshold, r.consecutive, r.after_s, r.then) == (None, 1, 0.0, "")
    (p,) = parse_questions("grip", [{"name": "x", "when": [
        {"do": "finish", "value": True}, {"do": "fail", "value": False, "after_s": 2.5}]}],
        None)
    assert [r.as_dict() for r in p.rules] == [
        {"do": "finish", "value": "true"}, {"do": "fail", "value": "false", "after_s": 2.5}]
    with pytest.raises(MonitorConfigError) as e:
        parse_questions("grip", [{"name": "x", "when": {"do": "finish", "value": "maybe"}}])
    assert str(e.value) == ("skills.grip.monitor[0].when.value: a predicate's value is true or "
                            "false, got 'maybe'")
    # no tool list: any then is taken as it is
    (t,) = parse_questions("grip", [{"name": "x", "when": {"do": "finish", "then": "any"}}])
    assert t.rules[0].then == "any"


@pytest.mark.parametrize("questions, message", [
    (["x"], "skills.grip.monitor[0]: a question must be a mapping, got str"),
    ([{"name": "x", "colour": "red"}],
     "skills.grip.monitor[0].colour: unknown key; allowed: camera, choices, instructions, "
     "name, type, when"),
    ([{"name": "x"}, {"name": "y"}, {"name": "x"}],
     "skills.grip.monitor[2].name: question 'x' appears twice"),
    ([{"name": "watch_for_1"}], "skills.grip.monitor[0].name: 'watch_for_1' is reserved"),
    ([{"name": "check_agent_action"}],
     "skills.grip.monitor[0].name: 'check_agent_action' is reserved"),
])
def test_bad_questions_say_exactly_what_and_where(questions, message):
    with pytest.raises(MonitorConfigError) as e:
        parse_questions("grip", questions)
    assert str(e.value) == message


def test_watch_for_questions_are_numbered_predicates_with_the_condition():
    from solarian_agent.core.monitor_rules import WATCH_FOR_RULE, watch_for_questions
    a, b = watch_for_questions(["  the cup falls ", "arm hits the table"])
    assert (a.name, b.name) == ("watch_for_1", "watch_for_2")
    assert a.question.type == "predicate" and a.watch_for == "the cup falls"
    assert a.question.instructions == (
        "True when this holds: the cup falls  (The planner added this condition; it must "
        "stay false while the action goes as it should.)")
    assert a.rules == (WATCH_FOR_RULE,) and b.rules == (WATCH_FOR_RULE,)
    assert WATCH_FOR_RULE.as_dict() == {"do": "escalate", "value": "true", "threshold": 0.8,
                                        "consecutive": 2, "after_s": 6.0}


def test_condition_at_its_boundaries():
    from solarian_agent.core.monitor_rules import Rule, condition
    r = Rule("finish", "holding", threshold=0.7, after_s=2.0)
    yes = MonitorAnswer("progress", "holding", 0.7)
    assert condition(r, yes, 2.0) == "met"  # at after_s exactly, at the threshold exactly
    assert condition(r, yes, 1.99) == "early"
    assert condition(r, None, 2.0) == "none"
    assert condition(r, MonitorAnswer("progress", "holding", 0.69), 3.0) == "below_floor"
    assert condition(r, MonitorAnswer("progress", "open", 0.9), 3.0) == "unmet"
    assert condition(Rule("finish", "holding"), MonitorAnswer("progress", "holding", 0.01),
                     0.0) == "met"


def test_an_escalated_rule_does_not_keep_later_rules_from_firing():
    from solarian_agent.core.monitor_rules import QuestionSpec, Rule
    from solarian_agent.core.vision import MonitorQuestion
    spec = QuestionSpec(MonitorQuestion("q", "predicate", "?"),
                        (Rule("escalate", "true"), Rule("fail", "true", consecutive=2)))
    st = RuleState(spec)
    yes = MonitorAnswer("q", "true", 0.9)
    assert [(r.do, n) for r, n in st.feed(yes, 0.0)] == [("escalate", 1)]
    assert [(r.do, n) for r, n in st.feed(yes, 0.1)] == [("fail", 2)]


def test_a_then_with_no_tools_known_and_a_question_naming_its_camera():
    with pytest.raises(MonitorConfigError) as e:
        parse_questions("grip", [{"name": "x", "when": {"do": "finish", "then": "carry"}}],
                        set())
    assert str(e.value) == "skills.grip.monitor[0].when.then: names no tool: 'carry'; tools: none"
    (q,) = parse_questions("grip", [{"name": "x", "camera": "wrist"}])
    assert q.question.camera == "wrist"


def test_an_answer_s_floor_is_its_own_rules_lowest_threshold_else_the_question_s() -> None:
    from solarian_agent.core.monitor_rules import Rule, floor

    rules = [Rule("finish", "holding", threshold=0.8), Rule("escalate", "failed", threshold=0.9),
             Rule("escalate", "failed", threshold=0.7, after_s=2.0),
             Rule("escalate", "approaching")]
    assert floor(rules, "holding") == 0.8
    assert floor(rules, "failed") == 0.7  # the lowest of the value's own rules
    # a value with no threshold of its own (or no rule): the lowest of the question's rules
    assert floor(rules, "approaching") == 0.7
    assert floor(rules, "lifting") == 0.7
    assert floor([Rule("finish", "holding", threshold=0.85)], "failed") == 0.85
    # no rule sets a threshold: no floor
    assert floor([Rule("escalate", "failed")], "failed") is None
    assert floor([], "failed") is None
