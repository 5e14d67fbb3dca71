"""ArmControllerConfig: each bad value refused naming its path and the rule; the smallest
accepted values."""

from __future__ import annotations

import math

import pytest

from solarian_agent.core.errors import ConfigError
from solarian_agent.hw.feetech import ArmControllerConfig


@pytest.mark.parametrize(("kw", "path", "message"), [
    ({"rate_hz": 0}, "controller.rate_hz", "must be in (0, 1000], got 0"),
    ({"rate_hz": 0.0}, "controller.rate_hz", "must be in (0, 1000], got 0.0"),
    ({"rate_hz": -50.0}, "controller.rate_hz", "must be in (0, 1000], got -50.0"),
    ({"rate_hz": 1000.5}, "controller.rate_hz", "must be in (0, 1000], got 1000.5"),
    ({"rate_hz": 1001}, "controller.rate_hz", "must be in (0, 1000], got 1001"),
    ({"rate_hz": 5000.0}, "controller.rate_hz", "must be in (0, 1000], got 5000.0"),
    ({"rate_hz": math.nan}, "controller.rate_hz", "must be in (0, 1000], got nan"),
    ({"rate_hz": math.inf}, "controller.rate_hz", "must be in (0, 1000], got inf"),
    ({"rate_hz": -math.inf}, "controller.rate_hz", "must be in (0, 1000], got -inf"),
    ({"command_timeout_s": 0.0}, "controller.command_timeout_s", "must be > 0, got 0.0"),
    ({"command_timeout_s": -1.0}, "controller.command_timeout_s", "must be > 0, got -1.0"),
    ({"command_timeout_s": math.nan}, "controller.command_timeout_s", "must be > 0, got nan"),
    ({"command_timeout_s": math.inf}, "controller.command_timeout_s", "must be > 0, got inf"),
    ({"estop_action": "explode"}, "controller.estop_action",
     "must be one of ('hold', 'torque_off'), got 'explode'"),
    ({"estop_action": "Hold"}, "controller.estop_action",
     "must be one of ('hold', 'torque_off'), got 'Hold'"),
    ({"max_consecutive_faults": 0}, "controller.max_consecutive_faults",
     "must be >= 1, got 0"),
    ({"max_consecutive_faults": -3}, "controller.max_consecutive_faults",
     "must be >= 1, got -3"),
    ({"lead_time_s": 0.0}, "controller.lead_time_s", "must be > 0, got 0.0"),
    ({"lead_time_s": -0.2}, "controller.lead_time_s", "must be > 0, got -0.2"),
    ({"lead_time_s": math.nan}, "controller.lead_time_s", "must be > 0, got nan"),
    ({"lead_time_s": math.inf}, "controller.lead_time_s", "must be > 0, got inf"),
])
def test_each_bad_controller_config_value_is_refused_naming_its_path(
        kw: dict, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        ArmControllerConfig(**kw)
    assert ei.value.path == path
    assert str(ei.value) == f"{path}: {message}"


@pytest.mark.parametrize("rate_hz", [1e-3, 0.5, 1, 1.0, 999.5, 1000, 1000.0])
def test_every_rate_in_the_half_open_range_is_accepted_up_to_1000_hz(rate_hz: float) -> None:
    cfg = ArmControllerConfig(rate_hz=rate_hz)
    assert cfg.rate_hz == rate_hz and cfg.period_s == 1.0 / rate_hz


def test_the_smallest_accepted_values_of_the_other_settings() -> None:
    cfg = ArmControllerConfig(command_timeout_s=1e-6, max_consecutive_faults=1,
                              lead_time_s=1e-6, estop_action="torque_off")
    assert (cfg.command_timeout_s, cfg.max_consecutive_faults, cfg.lead_time_s,
            cfg.estop_action) == (1e-6, 1, 1e-6, "torque_off")
