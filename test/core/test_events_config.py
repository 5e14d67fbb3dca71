import pytest

from solarian_agent.core.config import AgentConfig, load_agent_config
from solarian_agent.core.errors import ConfigError
from solarian_agent.core.events import Event, EventQueue


def ev(urgency="queue", content="x"):
    return Event("user", "chat", content, urgency=urgency)


def test_queue_drops_oldest_routine_event_never_interrupts():
    q = EventQueue(3)
    stop = ev("interrupt", "stop")
    q.put(stop)
    q.put(ev(content="a"))
    q.put(ev(content="b"))
    assert q.put(ev(content="c")) is True
    assert [e.content for e in q.peek()] == ["stop", "b", "c"]
    assert q.dropped_count == 1 and q.dropped[0].content == "a"


def test_queue_full_of_interrupts_refuses_routine_but_keeps_new_interrupt():
    q = EventQueue(2)
    q.put(ev("interrupt", "i1"))
    q.put(ev("interrupt", "i2"))
    assert q.put(ev(content="routine")) is False
    assert q.put(ev("interrupt", "i3")) is True
    assert [e.content for e in q.drain()] == ["i2", "i3"]
    assert q.dropped_count == 2


def test_reject_new_overflow():
    q = EventQueue(1, "reject_new")
    assert q.put(ev(content="a"))
    assert not q.put(ev(content="b"))
    assert [e.content for e in q.drain()] == ["a"]


def test_event_urgency_validated():
    with pytest.raises(ValueError, match="urgency"):
        Event("user", "chat", "x", urgency="soon")


def test_shipped_controller_yaml_loads(repo_root):
    cfg = load_agent_config(repo_root / "config" / "controller.yaml")
    assert isinstance(cfg, AgentConfig)
    assert cfg.planner.provider == "rules"
    assert cfg.monitor is not None and cfg.monitor.close_ups["wrist"][0] == 0.2
    assert cfg.planner_heartbeat_s is None


@pytest.mark.parametrize(
    "block, path, words",
    [
        ({"monitor": {"period_s": -1}}, "agent.monitor.period_s", "> 0"),
        ({"monitor": {"provider": "gpt"}}, "agent.monitor.provider", "openai_responses"),
        ({"budgets": {"max_turns": "many"}}, "agent.budgets.max_turns", "integer"),
        ({"planner": {"api_key_env": "sk-abc123secret"}}, "agent.planner.api_key_env",
         "environment variable"),
        ({"monitor": {"close_ups": {"wrist": [0.5, 0.5, 0.2, 0.9]}}},
         "agent.monitor.close_ups.wrist", "x0 < x1"),
        ({"dry_run": "yes"}, "agent.dry_run", "true or false"),
        ({"bogus": 1}, "agent.bogus", "allowed keys"),
    ],
)
def test_invalid_config_names_path_and_allowed(block, path, words):
    with pytest.raises(ConfigError) as e:
        load_agent_config({"agent": block})
    assert e.value.path == path
    assert words in str(e.value)


def test_config_is_frozen():
    cfg = load_agent_config({"agent": {}})
    with pytest.raises(AttributeError):
        cfg.dry_run = True  # type: ignore[misc]


def test_bad_yaml_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("agent: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_agent_config(p)


def test_the_dropped_list_keeps_the_last_hundred_and_counts_them_all():
    q = EventQueue(1, "reject_new")
    q.put(Event("user", "chat", "kept"))
    for i in range(101):
        assert q.put(Event("user", "chat", f"lost {i}")) is False
    assert q.dropped_count == 101
    assert len(q.dropped) == 100
    assert q.dropped[0].content == "lost 1" and q.dropped[-1].content == "lost 100"
    q2 = EventQueue(1, "reject_new")
    q2.put(Event("user", "chat", "kept"))
    for i in range(100):
        q2.put(Event("user", "chat", f"lost {i}"))
    assert len(q2.dropped) == 100 and q2.dropped[0].content == "lost 0"


def test_an_event_as_a_dict():
    e = Event("monitor", "verdict", "dropped it", {"action_id": "a1"}, "interrupt",
              "monitor_flag")
    assert e.as_dict() == {"source": "monitor", "channel": "verdict", "content": "dropped it",
                           "context": {"action_id": "a1"}, "urgency": "interrupt",
                           "kind": "monitor_flag", "seq": e.seq}
    assert Event("user", "chat", "x").seq > e.seq


def test_bad_queue_settings_and_interrupts_under_reject_new():
    with pytest.raises(ValueError, match="^EventQueue maxsize must be >= 1, got 0$"):
        EventQueue(0)
    with pytest.raises(ValueError, match="^unknown overflow rule 'spill'$"):
        EventQueue(2, "spill")
    q = EventQueue(1, "reject_new")
    assert q.put(Event("user", "chat", "routine"))
    assert q.put(Event("operator", "ui", "stop", urgency="interrupt"))  # never refused
    assert [e.content for e in q.dropped] == ["routine"]
    full = EventQueue(1)
    full.put(Event("operator", "ui", "stop", urgency="interrupt"))
    assert full.put(Event("user", "chat", "later")) is False
    assert [e.content for e in full.dropped] == ["later"] and full.dropped_count == 1


def test_the_queue_holds_256_events_by_default_and_drops_the_oldest_routine_one():
    q = EventQueue()
    assert (q.maxsize, q.overflow) == (256, "drop_oldest_routine")
    for i in range(256):
        assert q.put(ev(content=f"e{i}")) is True
    assert len(q) == 256 and q.dropped_count == 0
    assert q.put(ev(content="e256")) is True  # the 257th: the oldest routine event goes
    assert q.dropped_count == 1 and [e.content for e in q.dropped] == ["e0"]
    assert [e.content for e in q.peek()] == [f"e{i}" for i in range(1, 257)]
