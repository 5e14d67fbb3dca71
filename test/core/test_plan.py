"""The plan queue on its own (core/plan.py): what each step says of itself, how a replaced plan
keeps running actions and failure counts, which step an action takes, what the queue wants
next and how the plan is rendered for the model.  Exact values: these hold the promises that
mutation testing (``make mutate``) found held only loosely through the planner."""

from __future__ import annotations

from solarian_agent.core.plan import PlanQueue, PlanStep

TOOLS = {"pick", "place", "look"}


def queue(*steps: dict) -> PlanQueue:
    q = PlanQueue()
    q.replace(list(steps))
    return q


def test_a_step_as_a_dict_names_only_what_it_has() -> None:
    assert PlanStep(1, "look around").as_dict() == {
        "step": 1, "description": "look around", "status": "pending"}
    full = PlanStep(2, "pick the cup", "pick", {"point": [1, 2]}, "running", "a7", 1)
    assert full.as_dict() == {"step": 2, "description": "pick the cup", "status": "running",
                              "tool": "pick", "args": {"point": [1, 2]}, "action_id": "a7"}
    assert PlanStep(3, "x", "", {}, "done", "").as_dict() == {
        "step": 3, "description": "x", "status": "done", "args": {}}


def test_replace_numbers_steps_from_one_and_keeps_given_status() -> None:
    q = queue({"description": "a", "tool": "pick", "args": {"k": 1}},
              {"description": "b", "status": "done"})
    assert [(s.index, s.description, s.tool, s.args, s.status, s.failures, s.action_id)
            for s in q.steps] == [(1, "a", "pick", {"k": 1}, "pending", 0, None),
                                  (2, "b", None, None, "done", 0, None)]


def test_replace_keeps_a_running_step_and_its_action() -> None:
    q = queue({"description": "pick it", "tool": "pick"}, {"description": "place it",
                                                             "tool": "place"})
    assert q.claim("pick", "a1") is q.steps[0]
    q.replace([{"description": "look first", "tool": "look"},
               {"description": "pick it", "tool": "pick"},
               {"description": "place it", "tool": "place"}])
    assert [(s.index, s.status, s.action_id) for s in q.steps] == [
        (1, "pending", None), (2, "running", "a1"), (3, "pending", None)]
    assert q.running == [q.steps[1]]
    # marked done in the new plan: the running action does not make it running again
    q.replace([{"description": "pick it", "tool": "pick", "status": "done"}])
    assert (q.steps[0].status, q.steps[0].action_id) == ("done", None)
    # same description, another tool: another step
    q2 = queue({"description": "pick it", "tool": "pick"})
    q2.claim("pick", "a2")
    q2.replace([{"description": "pick it", "tool": "look"}])
    assert (q2.steps[0].status, q2.steps[0].action_id) == ("pending", None)


def test_replace_keeps_failures_and_failed_status_of_a_step_listed_again() -> None:
    q = queue({"description": "pick it", "tool": "pick"}, {"description": "place it",
                                                             "tool": "place"})
    q.claim("pick", "a1")
    assert q.action_ended("a1", "failed", retries=3) is q.steps[0]
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 1)
    q.replace([{"description": "pick it", "tool": "pick"}])
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 1)  # count kept
    for n in ("a2", "a3"):
        q.claim("pick", n)
        q.action_ended(n, "failed", retries=3)
    assert (q.steps[0].status, q.steps[0].failures) == ("failed", 3)
    q.replace([{"description": "pick it", "tool": "pick"}])
    assert (q.steps[0].status, q.steps[0].failures) == ("failed", 3)  # rewriting: no reset
    q.replace([{"description": "pick it", "tool": "pick", "status": "skipped"}])
    assert (q.steps[0].status, q.steps[0].failures) == ("skipped", 0)
    # a step that never failed carries nothing over
    q3 = queue({"description": "look", "tool": "look"})
    q3.replace([{"description": "look", "tool": "look"}])
    assert (q3.steps[0].status, q3.steps[0].failures) == ("pending", 0)


def test_claim_takes_the_first_pending_step_naming_the_tool() -> None:
    q = queue({"description": "a", "tool": "look", "status": "done"},
              {"description": "b", "tool": "look"}, {"description": "c", "tool": "look"})
    assert q.claim("pick", "a1") is None
    s = q.claim("look", "a1")
    assert s is q.steps[1] and (s.status, s.action_id) == ("running", "a1")
    assert q.claim("look", "a2") is q.steps[2]
    assert q.claim("look", "a3") is None
    assert q.step_of("a2") is q.steps[2] and q.step_of("zz") is None


def test_action_ended_outcomes() -> None:
    q = queue({"description": "a", "tool": "pick"})
    assert q.action_ended("nobody", "succeeded") is None
    q.claim("pick", "a1")
    q.action_ended("a1", "failed")
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 1)
    for n in ("a2", "a3", "a4"):  # retries 0: no limit
        q.claim("pick", n)
        q.action_ended(n, "failed", retries=0)
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 4)
    q.claim("pick", "a5")
    q.action_ended("a5", "timed_out", retries=1)  # not a failure
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 4)
    q.claim("pick", "a6")
    q.action_ended("a6", "stopped", retries=1)
    assert (q.steps[0].status, q.steps[0].failures) == ("pending", 4)
    q.claim("pick", "a7")
    assert q.action_ended("a7", "succeeded") is q.steps[0]
    assert (q.steps[0].status, q.steps[0].failures) == ("done", 0)
    q2 = queue({"description": "a", "tool": "pick"})
    q2.claim("pick", "b1")
    q2.action_ended("b1", "failed", retries=1)
    assert q2.steps[0].status == "failed"  # at the limit exactly
    q3 = queue({"description": "a", "tool": "pick"})
    q3.claim("pick", "c1")
    q3.action_ended("c1", "failed", retries=2)
    assert q3.steps[0].status == "pending"  # below it


def test_failed_for_names_the_failed_step_unless_a_pending_one_is_left() -> None:
    q = queue({"description": "a", "tool": "pick"}, {"description": "b", "tool": "pick"},
              {"description": "c", "tool": "look"})
    q.claim("pick", "a1")
    q.action_ended("a1", "failed", retries=1)
    assert q.failed_for("pick") is None  # step b can take the call
    q.claim("pick", "a2")
    q.action_ended("a2", "succeeded")
    assert q.failed_for("pick") is q.steps[0]
    assert q.failed_for("look") is None and q.failed_for("place") is None


def test_follow_up_takes_the_next_step_naming_its_tool_else_carries_its_own() -> None:
    q = queue({"description": "pick", "tool": "pick"}, {"description": "done", "tool": "look",
                                                         "status": "done"},
              {"description": "place", "tool": "place"})
    q.claim("pick", "a1")
    s = q.follow_up("a1", "place", "a2")
    assert s is q.steps[2] and (s.status, s.action_id) == ("running", "a2")
    assert q.steps[0].action_id == "a1"
    # the next pending step names another tool: the action's own step carries on
    q2 = queue({"description": "pick", "tool": "pick"}, {"description": "place",
                                                          "tool": "place"})
    q2.claim("pick", "a1")
    s = q2.follow_up("a1", "look", "a2")
    assert s is q2.steps[0] and (s.status, s.action_id) == ("running", "a2")
    assert q2.steps[1].status == "pending"
    # an action no step ran: the first pending step naming the tool, from the start
    q3 = queue({"description": "look", "tool": "look"}, {"description": "pick",
                                                          "tool": "pick"})
    assert q3.follow_up("zz", "look", "a9") is q3.steps[0]
    assert q3.steps[0].action_id == "a9"
    assert q3.follow_up("zz", "place", "a10") is None


def test_next_step_says_why_the_planner_must_be_woken() -> None:
    assert PlanQueue().next_step(set(), TOOLS).wake_reason == "there is no plan"
    q = queue({"description": "a", "tool": "look", "status": "done"},
              {"description": "b", "tool": "look", "status": "skipped"})
    assert q.next_step(set(), TOOLS).wake_reason == "every plan step is done"
    q = queue({"description": "a", "tool": "look"}, {"description": "b", "tool": "pick"})
    q.claim("look", "a1")
    nxt = q.next_step(set(), TOOLS)
    assert nxt.step is q.steps[1] and nxt.wake_reason == ""
    assert q.next_step({"pick"}, TOOLS).wake_reason == (
        "plan step 2 (pick) needs a point in a fresh image")
    assert q.next_step(set(), {"look"}).wake_reason == "plan step 2 names unknown tool 'pick'"
    q = queue({"description": "check it"})
    assert q.next_step(set(), TOOLS).wake_reason == (
        "plan step 1 ('check it') has no tool: checking the result is yours")
    q = queue({"description": "grab", "tool": "pick"}, {"description": "z", "tool": "look"})
    q.claim("pick", "a1")
    q.action_ended("a1", "failed", retries=1)
    nxt = q.next_step(set(), TOOLS)
    assert nxt.step is None and nxt.wake_reason == (
        "plan step 1 ('grab') failed 1 times in a row: change the plan or ask the user")


def test_render_and_as_list() -> None:
    assert PlanQueue().render() == "(no plan yet)"
    q = queue({"description": "pick the cup", "tool": "pick", "args": {"point": [1, 2],
                                                                       "name": "cup"}},
              {"description": "look", "tool": "look"},
              {"description": "check", "status": "done"})
    q.claim("pick", "a1")
    assert q.render() == ("1. [running] pick the cup -> pick(point=[1, 2], name='cup') [a1]\n"
                          "2. [pending] look -> look()\n"
                          "3. [done] check")
    q.action_ended("a1", "failed")
    assert q.render().splitlines()[0] == (
        "1. [pending] pick the cup -> pick(point=[1, 2], name='cup')")
    assert q.as_list() == [
        {"step": 1, "description": "pick the cup", "status": "pending", "tool": "pick",
         "args": {"point": [1, 2], "name": "cup"}, "action_id": "a1"},
        {"step": 2, "description": "look", "status": "pending", "tool": "look"},
        {"step": 3, "description": "check", "status": "done"}]
    long = queue({"description": "d", "tool": "pick", "args": {"text": "x" * 500}})
    call = long.render().split(" -> ", 1)[1]
    assert call == "pick(" + ("text='" + "x" * 500)[:120] + ")"
    wide = queue({"description": "y" * 1000}).render()
    assert wide.startswith("1. [pending] " + "y" * 787 + "… [1013 characters in all")


def test_follow_up_never_takes_a_step_before_its_own_and_survives_the_plan_end() -> None:
    q = queue({"description": "look", "tool": "look"}, {"description": "pick", "tool": "pick"})
    q.claim("pick", "a1")
    s = q.follow_up("a1", "look", "a2")  # the look step lies before: not the next step
    assert s is q.steps[1] and s.action_id == "a2"
    assert (q.steps[0].status, q.steps[0].action_id) == ("pending", None)
    q2 = queue({"description": "pick", "tool": "pick"})
    q2.claim("pick", "b1")
    assert q2.follow_up("b1", "place", "b2") is q2.steps[0]  # nothing after it


def test_render_shows_the_model_text_as_it_is_on_one_line() -> None:
    q = queue({"description": 'say "hi" \\ then', "tool": "look"})
    assert q.render() == '1. [pending] say "hi" \\ then -> look()'


def test_a_step_the_monitor_failed_waits_for_the_planner_who_may_call_its_tool_again() -> None:
    q = queue({"description": "pick the cup", "tool": "pick"},
              {"description": "place it", "tool": "place"})
    q.claim("pick", "a1")
    s = q.action_ended("a1", "failed", retries=3, by_monitor=True)
    assert s is q.steps[0]
    assert (s.status, s.decide, s.failures) == ("failed", True, 1)
    # the queue neither starts it nor moves past it: the planner is woken with the reason
    nxt = q.next_step(set(), TOOLS)
    assert nxt.step is None
    assert nxt.wake_reason == ("plan step 1 ('pick the cup') was failed by the monitor: call "
                               "its tool again, change the plan or ask the user")
    # a retry of the tool is the planner's decision, unlike a step the retry budget failed
    assert q.failed_for("pick") is None
    assert q.claim("pick", "a2") is s
    assert (s.status, s.decide, s.action_id) == ("running", False, "a2")


def test_only_a_failed_step_the_monitor_failed_is_claimed_by_the_planner_s_call() -> None:
    # a failure by the retry budget is not taken by a call of its tool
    q = queue({"description": "pick", "tool": "pick"})
    q.claim("pick", "a1")
    q.action_ended("a1", "failed", retries=1)
    assert (q.steps[0].status, q.steps[0].decide) == ("failed", False)
    assert q.claim("pick", "a2") is None
    # a step left marked by the monitor but since done is not taken again
    q2 = PlanQueue([PlanStep(1, "pick", "pick", status="done", decide=True),
                    PlanStep(2, "pick again", "pick")])
    assert q2.claim("pick", "a3") is q2.steps[1]
    assert q2.steps[0].status == "done"


def test_start_marks_only_the_step_the_harness_started_running_with_its_action() -> None:
    q = queue({"description": "pick it", "tool": "pick"}, {"description": "place it",
                                                             "tool": "place"})
    q.start(2, "a7")
    assert [(s.index, s.status, s.action_id) for s in q.steps] == [
        (1, "pending", None), (2, "running", "a7")]
    assert q.step_of("a7") is q.steps[1]
