"""Control characters from a model or a skill never reach a terminal raw: the demo (a real
run over HTTP through the Anthropic SDK whose finish_task summary carries NUL, ANSI and OSC
sequences and a forged line) and the terminal chat print them escaped."""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml
from ui_helpers import ChatLink

from solarian_agent.core.messages import AgentEvent, AgentState, OperatorEvent
from solarian_agent.testing.fake_model_server import FakeModelServer, Reply, ToolUse
from solarian_agent.ui.chat import ChatSession

EVIL = "done\x00\x1b[2J\x1b]0;pwned\x07\x9b31m\u202e\nOK: the table is tidy"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def test_the_demo_prints_a_models_summary_escaped(tmp_path: Path, capsys, monkeypatch):
    from solarian_agent import demo
    from solarian_agent.system import default_config_path

    monkeypatch.setenv("SOLARIAN_TEST_KEY", "sk-test-terminal-0123456789")
    with FakeModelServer(api_key="sk-test-terminal-0123456789") as server:
        server.add(Reply(text="giving up " + EVIL, tool_calls=[
            ToolUse("finish_task", {"summary": EVIL, "success": False})]))
        doc = yaml.safe_load(Path(default_config_path()).read_text())
        doc["agent"]["planner"] = {"provider": "anthropic", "model": "claude-test",
                                   "api_key_env": "SOLARIAN_TEST_KEY",
                                   "base_url": server.anthropic_base_url, "timeout_s": 10}
        cfg = tmp_path / "controller.yaml"
        cfg.write_text(yaml.safe_dump(doc))
        code = demo.main(["tidy up", "--config", str(cfg), "--monitor", "none",
                          "--no-record", "--out", str(tmp_path / "logs"), "--timeout", "60",
                          "--realtime"])  # the model answers over HTTP: on the wall clock
    out = capsys.readouterr().out
    assert code == 1
    ended = [line for line in out.splitlines() if line.startswith("run ended:")]
    assert len(ended) == 1 and "\\u0000\\u001b[2J\\u001b]0;pwned\\u0007" in ended[0]
    assert "\\nOK: the table is tidy" in ended[0]
    assert not RAW.search(out), repr(out)
    assert "OK: the table is tidy" not in [line.strip() for line in out.splitlines()]


def test_the_chat_prints_what_the_agent_says_escaped():
    link = ChatLink({"ok": False, "reason": "refused \x1b[31mred\x1b[0m"})
    out = io.StringIO()
    s = ChatSession(link, out, show_events=True, color=True)  # type: ignore[arg-type]
    s.start()
    link.cbs["state"](AgentState(1, "running", "t\x1b[5m", (), (), (
        {"role": "agent", "text": EVIL},)))
    link.cbs["event"](AgentEvent("2026-01-01T00:00:00.000Z", "run_ended",
                                 {"status": "failed", "summary": EVIL}))
    s.handle_line("go")  # (before the e-stop: while it is latched no message is sent)
    link.cbs["operator"](OperatorEvent("estop", {"reason": "hand \x1b[2K slip"}, 1.0))
    s.handle_line("/status")
    s.close()
    text = out.getvalue()
    # only the chat's own styles are escape sequences; nothing from the agent is
    own = re.sub(r"\x1b\[(?:\d+;)*\d*m", "", text)
    assert not RAW.search(own), repr(own)
    assert "\\u001b[2J" in text and "\\u001b[31mred" in text and "\\u001b[2K slip" in text
    # a message of several lines cannot print a line that looks like the chat's own
    assert "\nOK: the table is tidy" not in own
    assert "\n       OK: the table is tidy" in own
