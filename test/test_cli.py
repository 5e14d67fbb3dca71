"""The command line's conventions, command by command: ``--version``; help text on every
command, subcommand and option; ``--log-level`` / ``-v`` everywhere; a bad value is one line on
stderr with exit status 2; Ctrl-C exits 130 without a traceback; a missing optional extra names
its install line; nothing a user reads names the project's internal documents."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from solarian_agent import cli
from solarian_agent.cli_common import CliParser, version

REPO = Path(__file__).resolve().parents[1]
INTERNAL = re.compile(r"DESIGN\.md|§|\bseeds?[ /]+0\d\d|seeds/|\bseed 0\d\d")


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _parser_of(command: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``solarian-agent COMMAND`` builds (caught as it parses)."""
    def capture(self, args=None, namespace=None):
        raise _Captured(self)

    monkeypatch.setattr(CliParser, "parse_args", capture)
    with pytest.raises(_Captured) as e:
        cli.main([command])
    return e.value.parser


def _walk(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from _walk(sub)


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_command_option_has_help_logging_options_and_no_internal_references(
        command, monkeypatch):
    parsers = list(_walk(_parser_of(command, monkeypatch)))
    for p in parsers:
        opts = {o for a in p._actions for o in a.option_strings}
        assert {"--log-level", "-v", "--verbose", "--help"} <= opts, (p.prog, opts)
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                continue
            assert a.help and a.help != argparse.SUPPRESS, \
                f"{p.prog}: {a.option_strings or a.dest} has no help text"
        text = p.format_help()
        assert not INTERNAL.search(text), (p.prog, INTERNAL.search(text).group(0))
        assert p.prog.startswith("solarian-agent "), p.prog


def test_the_top_level_usage_lists_commands_and_the_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"solarian-agent {version()}"
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in cli.COMMANDS) and not INTERNAL.search(out)
    assert "--log-level" in out and "-v" in out
    assert cli.main(["frobnicate"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'frobnicate'" in err


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_a_bad_option_is_one_line_with_exit_status_2(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--no-such-option"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"solarian-agent {command}: error: ") and "Traceback" not in err


def test_bad_values_name_the_option(capsys):
    for argv, word in ((["panel", "--port", "70000"], "--port"),
                       (["chat", "--wait", "-1"], "--wait"),
                       (["demo", "--seed", "x"], "--seed"),
                       (["demo", "--pick", "learned"], "--pick"),
                       (["bench", "nosuchsuite"], "nosuchsuite"),
                       (["demo", "--log-level", "loud"], "--log-level"),
                       (["panel", "--monitor", "clairvoyant"], "clairvoyant"),
                       (["panel", "--ros", "--planner", "rules"], "--planner"),
                       (["chat", "--ros", "--config", "x.yaml"], "--config")):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse's usage error
            code = e.code
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and word in err, (argv, err)


def test_log_level_and_verbose_before_or_after_the_command(monkeypatch):
    import logging

    seen = []
    monkeypatch.setattr("solarian_agent.cli._bench",
                        lambda argv: seen.append(list(argv)) or 0)
    monkeypatch.setitem(cli.COMMANDS, "bench", (cli._bench, "x"))
    assert cli.main(["-v", "bench"]) == 0 and seen[-1] == ["-v"]
    p = CliParser(prog="solarian-agent x")
    p.parse_args(["--log-level", "debug"])
    assert logging.getLogger().level == logging.DEBUG
    p.parse_args(["-v"])
    assert logging.getLogger().level == logging.INFO
    p.parse_args([])
    assert logging.getLogger().level == logging.WARNING


def test_a_missing_extra_names_the_install_line(monkeypatch, capsys):
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        return None if name.split(".")[0] == "uvicorn" else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert cli.main(["panel"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "uvicorn" in err and "pip install 'solarian_agent[web]'" in err, err
    # the same form of hint as a model SDK's (models/factory.py)
    from solarian_agent.cli_common import install_hint

    assert "pip install 'solarian_agent[agent]'" in install_hint("anthropic", "the planner")


def _run(args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "solarian_agent.cli", *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def _read_until(stream, text: str, timeout_s: float) -> str:
    got: list[str] = []
    done = threading.Event()

    def read():
        for line in stream:
            got.append(line)
            if text in line:
                done.set()
                return
        done.set()

    threading.Thread(target=read, daemon=True).start()
    done.wait(timeout_s)
    return "".join(got)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args,ready", [
    (["chat", "--no-log", "--no-color"], "/help for commands"),
    (["panel", "--port", "0"], "operator panel on http://127.0.0.1:"),
    (["panel", "--port", "0", "--host", "localhost", "--config", "minimal.yaml", "--planner",
      "rules", "--monitor", "none"], "operator panel on http://localhost:"),
])
def test_ctrl_c_exits_130_without_a_traceback(args, ready, tmp_path):
    (tmp_path / "minimal.yaml").write_text("agent: {planner: {provider: rules}}\n")
    proc = _run(args, cwd=tmp_path)
    try:
        out = _read_until(proc.stdout, ready, 60)
        assert ready in out, out + proc.stderr.read() if proc.poll() is not None else out
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(30)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert code == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_version_from_a_shell():
    r = subprocess.run([sys.executable, "-m", "solarian_agent.cli", "--version"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"solarian-agent {version()}"


def test_bench_progress_per_suite_a_table_within_100_columns_and_json(tmp_path, monkeypatch,
                                                                     capsys):
    import json

    from solarian_agent import benchmarks

    (tmp_path / "tinybench_a.py").write_text(
        "def run(quick=False):\n"
        "    return [{'name': 'goal round trip through the skills node and back ' * 2,\n"
        "             'value': 12.345, 'unit': 'ms', 'baseline': 'bare rclpy action server '\n"
        "             'on the same host, same QoS', 'note': 'p50 of 200 goals; ' * 6}]\n")
    (tmp_path / "tinybench_b.py").write_text(
        "def run(quick=False):\n    return [{'name': 'x', 'value': 1, 'unit': 's'}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(benchmarks, "SUITES", {"a": "tinybench_a", "b": "tinybench_b"})
    assert cli.main(["bench", "a", "b"]) == 0
    out, err = capsys.readouterr()
    progress = err.strip().splitlines()
    assert progress == ["bench [1/2] a ...", progress[1], "bench [2/2] b ...", progress[3]]
    assert progress[1].startswith("bench [1/2] a: 1 rows in ")
    lines = out.rstrip("\n").splitlines()
    assert lines[0].split() == ["suite", "name", "value", "unit", "baseline", "note"]
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert len(lines) > 4  # the long cells wrapped onto more lines
    assert "p50 of 200" in out and "12.345" in out
    assert cli.main(["bench", "a", "b", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["suite"] for r in rows] == ["a", "b"] and rows[0]["value"] == 12.345
