"""Routing by meaning: the labelled table routes right, a stop stops exactly the
actions it names, a negated / deferred / errand "stop" stops nothing, a safety warning stops
everything; with a router model configured the same messages go to it and its failures
(an HTTP error, a timeout, an answer that does not parse) fall back to the rules."""

from __future__ import annotations

import json

import pytest

from solarian_agent.benchmarks import routing as bench
from solarian_agent.core import names
from solarian_agent.core.model_api import ModelError
from solarian_agent.core.routing import ROUTER_SYSTEM, Router
from solarian_agent.core.transport import QoS
from solarian_agent.core.utterance import canonical, read_message
from solarian_agent.models.scripted import ScriptedProvider, reply
from solarian_agent.testing.fake_model_server import FakeModelServer, HTTPError, Malformed
from solarian_agent.testing.fake_model_server import Reply as WireReply
from solarian_agent.testing.harness import make_harness

ISSUE_EXAMPLES = ("Azonnal állj le!", "don't stop now, keep going",
                  "Stop by the bin after the cup", "cancel the paper pick but keep the cup",
                  "Watch out, a person is reaching in!", "állj", "stop", "wait", "várj")


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------
def test_the_table_has_forty_rows_in_both_languages_and_the_issue_and_seed_examples():
    texts = {r.text for r in bench.TABLE}
    assert len(bench.TABLE) >= 40 and len(texts) == len(bench.TABLE)
    assert sum(r.lang == "hu" for r in bench.TABLE) >= 15
    assert sum(r.lang == "en" for r in bench.TABLE) >= 25
    assert set(ISSUE_EXAMPLES) <= texts
    # the textbook case of each strategy
    assert {"Milyen idő lesz ma?", "Küldd el a jelentést kínaiul", "Mégse",
            "Stop! Rosszul mondtam", "Hány óra van?"} <= texts
    assert {r.kind for r in bench.TABLE} == {"interrupt", "queue", "parallel"}
    # scoped stops are there, not only stop-everything
    assert any(r.stops and set(r.stops) != set(bench.ALL) for r in bench.TABLE)


@pytest.mark.parametrize("row", bench.TABLE, ids=lambda r: r.text)
def test_every_row_routes_right(row):
    d = Router().route(bench.message(row.text), bench.CONTEXT)
    assert d is not None and d.by == "rule"
    assert d.urgency == row.kind, d
    assert set(bench.stopped(d)) == set(row.stops), d
    assert d.stop == bool(row.stops) or row.kind != "interrupt" or not d.stop


def test_benchmark_rows_measure_the_router_against_the_regex_baseline_in_the_same_run():
    rows = bench.run()
    kind, scope = rows
    assert kind["unit"] == scope["unit"] == "%"
    assert kind["value"] == 100.0 and scope["value"] == 100.0
    old = bench.score(bench.regex_router())
    assert kind["baseline"] == pytest.approx(100.0 * old.kind_accuracy)
    assert scope["baseline"] == pytest.approx(100.0 * old.scope_accuracy)
    # the baseline really is the old router: the issue's failures are its failures
    wrong = {w.split(":")[0] for w in old.wrong}
    assert {"Azonnal állj le!", "don't stop now, keep going", "Stop by the bin after the cup",
            "cancel the paper pick but keep the cup",
            "Watch out, a person is reaching in!"} <= wrong
    assert kind["baseline"] < kind["value"]


def test_bench_lists_the_routing_suite():
    from solarian_agent import benchmarks

    assert benchmarks.SUITES["routing"] == "solarian_agent.benchmarks.routing"
    got = benchmarks.run(["routing"])
    assert [r["suite"] for r in got] == ["routing", "routing"]


@pytest.mark.parametrize("text, urgency, stop", [
    # not in the table: wording the table does not use
    ("STOP IT NOW!!!", "interrupt", True),
    ("Abort, abort", "interrupt", True),
    ("please don't cancel anything", "queue", False),
    ("never stop, just keep at it", "queue", False),
    ("someone's hand is in the way!", "interrupt", True),
    ("allj le azonnal", "interrupt", True),  # typed without accents
    ("hagyd abba a pohár lerakását", "interrupt", True),
    ("mit látsz?", "parallel", False),
    ("utána állj meg", "queue", False),
    ("I don't want you to stop", "queue", False),
    ("Why did you stop?", "parallel", False),
    ("Can you stop the paper pick?", "interrupt", True),
    ("put the cup in the bin and then stop", "queue", False),
    ("Ne hagyd abba!", "queue", False),
    ("drop it in the bin", "queue", False),
    ("hold it above the tray for a moment", "queue", False),
    ("Elég nehéz a pohár", "queue", False),
    ("Elég!", "interrupt", True),
    ("do we have enough cups?", "parallel", False),
    ("Don't move!", "interrupt", True),  # a negated verb that is itself the stop
    ("Ne mozdulj!", "interrupt", True),
    ("pause", "interrupt", True),
    ("pause after the cup is on the tray", "queue", False),
    ("Ouch!", "interrupt", True),  # pain: a person is hurt, the arm stops
    ("Au, ez fáj!", "interrupt", True),
    ("Jaj!", "interrupt", True),
    ("how do you stop the arm?", "queue", False),  # a question about stopping, no order
])
def test_more_wordings(text, urgency, stop):
    r = read_message(text)
    assert (r.urgency, r.stop) == (urgency, stop), r


def test_canonical_words_cover_both_languages():
    assert {canonical(w) for w in ("cups", "pohár", "poharat", "bögrét", "mug")} == {"cup"}
    assert {canonical(w) for w in ("picking", "felvételét", "grasp")} == {"pick"}
    assert read_message("hagyd abba a pohár lerakását").targets == ("cup", "place")


# --------------------------------------------------------------------------------------------
# in the planner: only the named actions stop
# --------------------------------------------------------------------------------------------
PLAN = ("update_plan", {"steps": [{"description": "Pick up the crumpled paper", "tool": "wait"},
                                  {"description": "Hold the red cup over the tray",
                                   "tool": "wait"}]})


def two_actions(script_after, **kw):
    h = make_harness([reply("", PLAN, ("wait", {"seconds": 20}), ("wait", {"seconds": 20})),
                      *script_after], **kw)
    h.events = []
    h.bus.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, callback=h.events.append,
                    qos=QoS(depth=10_000))
    h.say("tidy up")
    assert h.run_until(lambda: len(h.planner.actions) == 2 and h.planner.turn is None, 3)
    paper, cup = sorted(h.planner.actions, key=lambda a: h.planner.actions[a].step)
    return h, paper, cup


def logged(h, kind):
    return [e.data for e in h.events if e.kind == kind]


def test_a_scoped_stop_stops_only_the_named_action():
    h, paper, cup = two_actions([reply("ok, the cup goes on")])
    h.runtime.run_for(1.0)
    h.say("cancel the paper pick but keep the cup")
    assert h.run_until(lambda: paper not in h.planner.actions, 1)
    h.runtime.run_for(1.0)
    assert cup in h.planner.actions and h.executor.running  # the cup's action goes on
    route = next(r for r in logged(h, "route") if r["event"] == "message"
                 and "paper" in r["content"])
    assert (route["urgency"], route["stop"], route["stop_actions"]) == (
        "interrupt", True, [paper])
    interrupt = logged(h, "interrupt")[-1]
    assert interrupt["stopped"] == [paper] and interrupt["kept"] == [cup]
    stop = logged(h, "stop_action")
    assert [s["action_id"] for s in stop] == [paper]
    woke = [m for m in h.provider.calls[1].request.messages if m.role == "user"][-1].text()
    assert f"still running: {cup} (wait)" in woke


def test_the_issue_defects_without_the_fix_stop_everything():
    """Each of these stopped every running action (or none, for the warning) before."""
    for text, stops in (("don't stop now, keep going", ()), ("Stop by the bin after the cup", ()),
                        ("Watch out, a person is reaching in!", ("paper", "cup")),
                        ("Azonnal állj le!", ("paper", "cup"))):
        h, paper, cup = two_actions([reply("noted"), reply("noted")])
        ids = {"paper": paper, "cup": cup}
        h.runtime.run_for(0.5)
        h.say(text)
        h.runtime.run_for(1.0)
        stopped = {s["action_id"] for s in logged(h, "stop_action")}
        assert stopped == {ids[s] for s in stops}, text
        route = next(r for r in logged(h, "route") if r["content"] == text)
        assert route["urgency"] == ("interrupt" if stops else "queue"), text


# --------------------------------------------------------------------------------------------
# with a router model: the same cases go to it; its failure falls back to the rules
# --------------------------------------------------------------------------------------------
def test_with_a_router_model_messages_go_to_it_except_stops_of_everything():
    r = Router(model=ScriptedProvider([]))
    at_once = []
    for row in bench.TABLE:
        d = r.route(bench.message(row.text), bench.CONTEXT)
        if row.kind == "interrupt" and set(row.stops) == set(bench.ALL):
            # a safety warning or a stop of everything never waits for a model
            assert d is not None and d.stop and d.stop_actions is None, row.text
            at_once.append(row.text)
        else:
            assert d is None, row.text  # the model decides: scoped stops, negations, ...
    assert "Watch out, a person is reaching in!" in at_once and "Azonnal állj le!" in at_once
    assert len(at_once) < len(bench.TABLE) / 2
    req = r.request(bench.message("cancel the paper pick"), bench.CONTEXT)
    body = json.loads(req.messages[0].text())
    assert body["running"][0] == {"action_id": "a1", "tool": "pick_object",
                                  "step": "Pick up the crumpled paper",
                                  "params": '{"point": [210, 140]}'}
    assert req.system == ROUTER_SYSTEM and "stop_actions" in req.response_schema["properties"]


def test_router_model_answers_its_scope_and_bad_answers_fall_back_to_the_rules():
    r = Router(model=ScriptedProvider([]))
    ev = bench.message("cancel the paper pick but keep the cup")
    good = r.parse(reply('{"urgency": "interrupt", "reason": "only the paper", "stop": true, '
                         '"stop_actions": ["a1"]}'), None, bench.CONTEXT, ev)
    assert (good.by, good.urgency, good.stop_actions) == ("model", "interrupt", ("a1",))
    for bad in ('{"urgency": "interrupt", "reason": "x", "stop": true, '
                '"stop_actions": ["a9"]}', '{"urgency": "soon", "reason": "x"}', "not json",
                '{"urgency": "interrupt", "reason": "x", "stop": "yes"}'):
        d = r.parse(reply(bad), None, bench.CONTEXT, ev)
        assert (d.by, d.urgency, bench.stopped(d)) == ("fallback", "interrupt", ("a1",)), bad
        assert "answered badly" in d.reason and "the rules decided" in d.reason
    d = r.parse(None, ModelError("timeout", "slow"), bench.CONTEXT,
                bench.message("don't stop now, keep going"))
    assert (d.by, d.urgency, d.stop) == ("fallback", "queue", False) and "timeout" in d.reason


def _router_config(server, **extra):
    return {"events": {"router": {"provider": "openai", "model": "router-small",
                                  "base_url": server.openai_base_url, "max_retries": 0,
                                  **extra}}}


def test_router_model_over_http_scopes_a_stop():
    with FakeModelServer() as server:
        h, paper, cup = two_actions([reply("noted")], config=_router_config(server))
        assert not server.requests  # the message that started the run was not routed
        server.add(WireReply(json.dumps({"urgency": "interrupt", "reason": "only the paper",
                                         "stop": True, "stop_actions": [paper]})))
        h.say("the paper one, forget about it")
        assert h.run_until(lambda: paper not in h.planner.actions, 2)
        h.runtime.run_for(0.5)
        assert cup in h.planner.actions
        route = next(r for r in logged(h, "route") if r["event"] == "message"
                     and r["content"].startswith("the paper"))
        assert (route["by"], route["stop_actions"]) == ("model", [paper])
        body = server.requests[-1].body
        assert body["model"] == "router-small"
        assert "the paper one, forget about it" in json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("failure, why", [
    (HTTPError(503, "overloaded"), "router model failed"),
    (Malformed(b"{not json"), "router model failed"),
    (WireReply("the user wants the paper stopped"), "is not JSON"),
    (WireReply('{"urgency": "interrupt", "reason": "x"}', delay_s=2.0), "timeout"),
])
def test_router_model_failure_over_http_falls_back_to_the_rules(failure, why):
    with FakeModelServer() as server:
        h, paper, cup = two_actions([reply("noted")],
                                    config=_router_config(server, timeout_s=0.5))
        server.add(failure)
        h.say("cancel the paper pick but keep the cup")
        assert h.run_until(lambda: paper not in h.planner.actions, 3)
        h.runtime.run_for(0.5)
        assert cup in h.planner.actions
        route = next(r for r in logged(h, "route") if r["event"] == "message"
                     and "paper" in r["content"])
        assert route["by"] == "fallback" and why in route["reason"], route["reason"]
        assert "the rules decided" in route["reason"]
        assert route["stop_actions"] == [paper]
        assert len(server.requests) == 1  # max_retries 0: one request


def test_odd_input_reads_as_a_routine_addition_and_never_raises():
    import random

    rng = random.Random(3)
    alphabet = "abc állj stop ne !?,.'’\n\t😀ő" + "x" * 5
    texts = ["", "?!", "   ", ",,,", "a" * 5000, "😀😀", "'", "stop" * 300]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
              for _ in range(300)]
    for t in texts:
        r = read_message(t)
        assert r.urgency in ("interrupt", "queue", "parallel") and r.reason
    for t in ("", "?!", "   ", "😀😀"):
        assert read_message(t).urgency != "interrupt"
