"""The package's interface definitions, under the name the benchmarks' recorder imports
(:mod:`solarian_agent.rosmsg.interfaces` is where they live: they need no ROS)."""

from __future__ import annotations

from ..rosmsg.interfaces import (
    InterfaceError,
    definitions,
    interface_files,
    interface_root,
    typestore,
)

__all__ = ["InterfaceError", "definitions", "interface_files", "interface_root", "typestore"]
