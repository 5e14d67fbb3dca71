"""The offline planner's reading of a task: every line, objects by colour and kind,
negations, things not on the table as questions, requests it cannot do, order."""

from __future__ import annotations

from solarian_agent.models.task_reading import goal_holds, read_task


def test_every_line_is_read_in_the_order_given() -> None:
    r = read_task("put the yellow paper in the bin\nput the red cup on the tray")
    assert r.goals == (("yellow_paper", "bin"), ("red_cup", "tray"))
    assert r.ordered
    r = read_task("put the red cup on the tray and the yellow paper in the bin")
    assert r.goals == (("red_cup", "tray"), ("yellow_paper", "bin")) and not r.ordered
    assert read_task("put the yellow paper in the bin, then put the red cup on the tray"
                     ).goals[0] == ("yellow_paper", "bin")


def test_an_object_not_on_the_table_is_a_question_not_a_substitute() -> None:
    r = read_task("put the blue cup on the tray")
    assert r.goals == ()
    assert r.questions and "no blue cup" in r.questions[0] and "red cup" in r.questions[0]
    r = read_task("put the bottle in the bin")
    assert r.goals == () and "no bottle" in r.questions[0]


def test_negations_are_answered_never_acted_on() -> None:
    r = read_task("don't put the cup on the tray; leave everything as it is")
    assert r.goals == ()
    assert r.declined == ("you asked me not to put the red cup on the tray",)
    assert set(r.kept()) == {"red_cup", "yellow_paper"}
    r = read_task("leave the cup alone and bin the paper")
    assert r.goals == (("yellow_paper", "bin"),) and r.kept() == ("red_cup",)


def test_phrasings_where_the_meaning_is_clear() -> None:
    assert read_task("bin the paper").goals == (("yellow_paper", "bin"),)
    assert read_task("Throw the crumpled paper into the trash.").goals == (
        ("yellow_paper", "bin"),)


def test_requests_it_cannot_do_and_nonsense() -> None:
    r = read_task("put the red cup in the sink")
    assert r.goals == () and "no sink" in r.impossible[0]
    assert not read_task("sing a song").understood
    assert not read_task("   ").understood


def test_goal_holds_checks_goals_and_kept_objects() -> None:
    r = read_task("put the red cup on the tray")
    assert goal_holds(r, {"red_cup": "tray", "yellow_paper": "table"})[0]
    ok, lines = goal_holds(r, {"red_cup": "table"})
    assert not ok and lines == ["red cup on the tray: no (table)"]
    keep = read_task("leave everything as it is")
    start = {"red_cup": "table", "yellow_paper": "table"}
    assert goal_holds(keep, start, start)[0]
    assert not goal_holds(keep, {**start, "red_cup": "tray"}, start)[0]
    assert not goal_holds(read_task("put the blue cup on the tray"), start, start)[0]
