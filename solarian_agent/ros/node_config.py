"""Where the package's files are (its share directory) and the agent configuration the nodes
read: the shipped config/controller.yaml, a user's file over it, the ROS parameters over both.
No rclpy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.config import AgentConfig, load_agent_config
from ..core.errors import ConfigError


def share_dir() -> Path:
    """The package's share directory: the source tree, or the installed
    ``share/solarian_agent`` (found the way the URDF is found)."""
    from ..arm.kinematics import default_urdf_path

    return default_urdf_path().parent.parent


def default_config_path() -> Path:
    return share_dir() / "config" / "controller.yaml"


def load_config(config_file: str = "", overrides: Mapping[str, Any] | None = None
                ) -> AgentConfig:
    """The agent: block of ``config_file`` laid over the shipped config/controller.yaml
    (default: that file alone), with ``overrides`` (already-typed ROS parameters: cameras,
    control_period_s) laid over both and validated exactly as the core validates the YAML.
    The ``cameras`` parameter selects among the configured cameras: ``cameras:=overhead``
    drops the settings for the wrist (the shipped file's or the user's own)."""
    from ..core.config import lay_over, read_yaml

    shipped = default_config_path()
    path = Path(config_file) if config_file else shipped
    own = path.expanduser().resolve() != shipped.resolve()
    doc = (read_yaml(path) or {}) if own else {}
    if not isinstance(doc, dict):
        raise ConfigError("agent", f"{path} must hold a mapping at the top level")
    base = read_yaml(shipped) or {}
    block = lay_over(dict(base.get("agent") or {}) if isinstance(base, dict) else {},
                     dict(doc.get("agent") or {}))
    # the parameters select among the file's settings: cameras:=overhead drops the wrist's
    block = lay_over(block, {k: v for k, v in (overrides or {}).items()
                             if v is not None and v != [] and v != ""})
    return load_agent_config({**doc, "agent": block}, where=str(path))


__all__ = ["default_config_path", "load_config", "share_dir"]
