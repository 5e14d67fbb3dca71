"""The package's own ROS interfaces (``msg/ srv/ action/``) as data, without ROS.

On a ROS machine rosidl generates the real message classes from these files (see
``CMakeLists.txt``).  Without ROS, :func:`typestore` registers the same definitions with
``rosbags`` so bags can be written and read and the message conversion can be tested against
real CDR serialization.  A service ``X`` becomes ``solarian_agent/srv/X_Request`` and
``X_Response``; the action ``Skill`` becomes ``solarian_agent/action/Skill_Goal``,
``Skill_Result`` and ``Skill_Feedback`` (rosidl's names).

Where the files are found: ``$SOLARIAN_AGENT_INTERFACES`` (a directory holding ``msg/ srv/
action/``), the source tree (``<repo>/msg``), or an installed share directory
(``<prefix>/share/solarian_agent``, as colcon and the pip data_files install them).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

PACKAGE = "solarian_agent"
KINDS = ("msg", "srv", "action")

# Standard types the ROS graph uses that the rosbags typestore does not ship.
EXTRA_STANDARD: dict[str, str] = {
    "std_srvs/srv/Trigger_Request": "",
    "std_srvs/srv/Trigger_Response": "bool success\nstring message\n",
    "std_srvs/srv/SetBool_Request": "bool data\n",
    "std_srvs/srv/SetBool_Response": "bool success\nstring message\n",
    "std_srvs/srv/Empty_Request": "",
    "std_srvs/srv/Empty_Response": "",
}


class InterfaceError(RuntimeError):
    """The interface definitions could not be found or parsed."""


def _candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("SOLARIAN_AGENT_INTERFACES")
    if env:
        out.append(Path(env))
    out.append(Path(__file__).resolve().parents[2])  # the source tree
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, "/usr/local", "/usr")):
        out.append(Path(prefix) / "share" / PACKAGE)
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            out.append(Path(prefix) / "share" / PACKAGE)
    return out


@functools.lru_cache(maxsize=1)
def interface_root() -> Path:
    """The directory holding ``msg/``, ``srv/`` and ``action/``."""
    tried = []
    for root in _candidates():
        tried.append(str(root))
        if (root / "msg" / "AgentState.msg").is_file() and (root / "action").is_dir():
            return root
    raise InterfaceError("the solarian_agent interface files (msg/ srv/ action/) were not "
                         f"found; looked in: {', '.join(tried)}. Set SOLARIAN_AGENT_INTERFACES "
                         "to the directory that holds them.")


def interface_files(root: Path | None = None) -> list[Path]:
    """Every interface file, sorted (``msg/A.msg``, ``srv/B.srv``, ``action/C.action``)."""
    root = root or interface_root()
    return sorted(p for kind in KINDS for p in (root / kind).glob(f"*.{kind}"))


def _split(text: str, parts: int, where: Path) -> list[str]:
    chunks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip() == "---":
            chunks.append([])
        else:
            chunks[-1].append(line)
    if len(chunks) != parts:
        raise InterfaceError(f"{where}: expected {parts} sections separated by ---, "
                             f"found {len(chunks)}")
    return ["\n".join(c) + "\n" for c in chunks]


def definitions(root: Path | None = None) -> dict[str, str]:
    """ROS type name -> message definition text, for every type the package defines."""
    out: dict[str, str] = {}
    for path in interface_files(root):
        kind, name = path.parent.name, path.stem
        text = path.read_text(encoding="utf-8")
        if kind == "msg":
            out[f"{PACKAGE}/msg/{name}"] = text
        elif kind == "srv":
            req, resp = _split(text, 2, path)
            out[f"{PACKAGE}/srv/{name}_Request"] = req
            out[f"{PACKAGE}/srv/{name}_Response"] = resp
        else:
            goal, result, feedback = _split(text, 3, path)
            out[f"{PACKAGE}/action/{name}_Goal"] = goal
            out[f"{PACKAGE}/action/{name}_Result"] = result
            out[f"{PACKAGE}/action/{name}_Feedback"] = feedback
    return out


def _typesdict(defs: dict[str, str]) -> dict[str, Any]:
    from rosbags.typesys import get_types_from_msg

    types: dict[str, Any] = {}
    for typename, text in defs.items():
        pkg, kind, name = typename.split("/")
        # parsed as a msg of the same package so relative references (``ToolSpec[]``)
        # resolve to pkg/msg/...; then filed under its real name
        parsed = get_types_from_msg(text, f"{pkg}/msg/{name}")
        for key, value in parsed.items():
            types[key.replace(f"{pkg}/msg/{name}", typename)] = value
    return types


@functools.lru_cache(maxsize=4)
def typestore(distro: str = "ROS2_JAZZY") -> Any:
    """A rosbags typestore with the standard types of ``distro`` plus the package's own."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(getattr(Stores, distro))
    extra = {k: v for k, v in EXTRA_STANDARD.items() if k not in store.types}
    try:
        store.register(_typesdict({**extra, **definitions()}))
    except Exception as e:  # a malformed definition names itself
        raise InterfaceError(f"could not register the package's interfaces: {e}") from e
    return store


__all__ = ["EXTRA_STANDARD", "InterfaceError", "definitions", "interface_files",
           "interface_root", "typestore"]
