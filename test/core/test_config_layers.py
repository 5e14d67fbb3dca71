"""A user's configuration file is laid over the shipped config/controller.yaml: an empty file,
or one that only picks the planner, runs with every shipped default (cameras included); an
unknown top-level key and a camera name that no camera has are errors naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from solarian_agent import demo
from solarian_agent.core.errors import ConfigError
from solarian_agent.ros.components import load_config as ros_load_config
from solarian_agent.system import load_config


def _write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text", ["", "agent: {planner: {provider: rules}}\n", "agent:\n"])
def test_an_empty_or_minimal_file_has_the_shipped_defaults(tmp_path, text):
    shipped = load_config(None)
    for load in (load_config, ros_load_config):
        cfg = load(str(_write(tmp_path, text)))
        assert list(cfg.cameras) == ["overhead", "wrist"]
        assert cfg == shipped, load


def test_a_file_overrides_only_what_it_names(tmp_path):
    cfg = load_config(_write(tmp_path, "agent:\n  budgets: {max_turns: 12}\n"
                                       "  monitor: {period_s: 0.8}\n"))
    shipped = load_config(None)
    assert cfg.budgets.max_turns == 12
    assert cfg.budgets.max_minutes == shipped.budgets.max_minutes  # merged key by key
    assert cfg.monitor is not None and shipped.monitor is not None
    assert cfg.monitor.period_s == 0.8 and cfg.monitor.close_ups == shipped.monitor.close_ups


def test_one_camera_of_its_own_drops_the_shipped_wrist_close_up(tmp_path):
    cfg = load_config(_write(tmp_path, "agent: {cameras: [overhead]}\n"))
    assert list(cfg.cameras) == ["overhead"]
    assert cfg.monitor is not None and "wrist" not in cfg.monitor.close_ups


def test_an_unknown_top_level_key_is_an_error_naming_it(tmp_path):
    p = _write(tmp_path, "agnet: {planner: {provider: rules}}\n")
    for load in (load_config, ros_load_config):
        with pytest.raises(ConfigError) as e:
            load(str(p))
        assert "agnet" in str(e.value) and "agent:" in str(e.value), str(e.value)


def test_a_camera_no_camera_has_is_an_error_naming_it(tmp_path):
    p = _write(tmp_path, "agent:\n  monitor: {close_ups: {wrsit: [0.2, 0.3, 0.8, 1.0]}}\n")
    for load in (load_config, ros_load_config):
        with pytest.raises(ConfigError) as e:
            load(str(p))
        msg = str(e.value)
        assert "agent.monitor.close_ups.wrsit" in msg and "'wrsit'" in msg, msg
        assert "overhead" in msg and "wrist" in msg  # the cameras there are


def test_demo_cli_errors_for_bad_config_files_are_one_line(tmp_path, capsys):
    for text, word in (("agnet: {}\n", "agnet"),
                       ("agent: {monitor: {close_ups: {wrsit: [0, 0, 1, 1]}}}\n", "wrsit")):
        code = demo.main(["--config", str(_write(tmp_path, text)), "--no-record"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and word in err and len(err.splitlines()) == 1, err


@pytest.mark.timeout(300)
def test_the_demo_tidies_with_a_minimal_file(tmp_path, capsys):
    """The new user's file: only the planner.  The run succeeds with the shipped defaults."""
    p = _write(tmp_path, "agent: {planner: {provider: rules}}\n")
    code = demo.main(["--config", str(p), "--no-record", "--out", str(tmp_path / "logs"),
                      "--timeout", "300"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "tool_refused" not in out


def test_the_cameras_parameter_selects_among_the_configured_cameras(tmp_path):
    """A node's ``cameras:=overhead`` over the shipped file, or over an installed copy of it
    (what a node reads from share/), drops the wrist's settings instead of failing."""
    from solarian_agent.system import default_config_path

    copy = _write(tmp_path, default_config_path().read_text(), "controller.yaml")
    for path in ("", str(copy)):
        cfg = ros_load_config(path, {"cameras": ["overhead"]})
        assert list(cfg.cameras) == ["overhead"]
        assert cfg.monitor is not None and "wrist" not in cfg.monitor.close_ups
