"""Where the package's shared files are (``urdf/``, ``config/``): the source tree (also an
editable install), else ``share/solarian_agent`` under ``sys.prefix`` or an ament/colcon prefix.
Never the working directory, so the tools find them wherever they are run from."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PKG = "solarian_agent"


def share_candidates(*parts: str) -> list[Path]:
    """Every place ``share/solarian_agent/<parts>`` may be, in the order they are tried."""
    out = [Path(__file__).resolve().parents[1].joinpath(*parts)]
    prefixes = [sys.prefix, sys.base_prefix]
    prefixes += [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    out += [Path(prefix, "share", PKG, *parts) for prefix in prefixes]
    return out


def find_share_file(*parts: str) -> Path | None:
    """The first existing candidate of :func:`share_candidates`, or None."""
    for path in share_candidates(*parts):
        if path.is_file():
            return path
    return None


__all__ = ["find_share_file", "share_candidates"]
