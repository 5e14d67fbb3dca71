"""Learned-policy skills: a config yaml, backends behind a Protocol, observations and action
chunks (see :mod:`.skill`)."""

from .backends import PolicyBackend, PolicyLoadError, open_backend
from .config import PolicyConfig, default_policy_config_path, load_policy_config
from .skill import LoadedPolicy, PolicySkill, load_policy

__all__ = ["LoadedPolicy", "PolicyBackend", "PolicyConfig", "PolicyLoadError", "PolicySkill",
           "default_policy_config_path", "load_policy", "load_policy_config", "open_backend"]
