"""The rosidl-generated classes by type name (``pkg/msg/Name``, ``pkg/srv/Name``,
``pkg/action/Name`` and their parts ``pkg/srv/Name_Request`` / ``pkg/action/Name_Goal``), with
importlib only: the node shells need no ``rosidl_runtime_py`` (not on PyPI).

The package's own generated interfaces live beside the hand-written code when the package is
installed by colcon (``<prefix>/lib/python3.X/site-packages/solarian_agent/msg``).  Run from
a source tree or an editable install, ``solarian_agent`` is the source directory, which holds
no generated code: :func:`find_generated_interfaces` then adds the generated package directory
of the first ament prefix that has one (``AMENT_PREFIX_PATH``, then the checkout's own
``build/ros/install`` that ``make ros`` builds) to ``solarian_agent.__path__``, after the
source directory, so the source stays what runs and only ``solarian_agent.msg / .srv /
.action`` (and the type support extensions) come from the build; the prefix's ``lib`` joins
LD_LIBRARY_PATH.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

PACKAGE = "solarian_agent"
_PARTS = {"srv": ("Request", "Response", "Event"),
          "action": ("Goal", "Result", "Feedback", "SendGoal", "GetResult", "FeedbackMessage")}


class InterfacesNotBuiltError(ImportError):
    """The package's generated interfaces are not importable (not built, or not found)."""


# where ``make ros`` builds the interfaces of a source checkout (found without any set-up)
CHECKOUT_PREFIX = Path(__file__).resolve().parents[2] / "build" / "ros" / "install"


def _generated_dirs() -> list[Path]:
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    out = []
    for prefix in [*prefixes, str(CHECKOUT_PREFIX)]:
        for sub in ("site-packages", "dist-packages"):
            out.append(Path(prefix, "lib", pyver, sub, PACKAGE))
    return out


def find_generated_interfaces() -> Path | None:
    """Make ``solarian_agent.msg`` importable; the directory it comes from (None: already
    part of the package, or not found)."""
    import solarian_agent

    here = [Path(p).resolve() for p in solarian_agent.__path__]
    if any((p / "msg" / "__init__.py").is_file() for p in here):
        return None
    for d in _generated_dirs():
        if (d / "msg" / "__init__.py").is_file() and d.resolve() not in here:
            solarian_agent.__path__.append(str(d))
            importlib.invalidate_caches()
            _load_type_support(d.parents[3] / "lib")
            return d
    return None


def _load_type_support(lib: Path) -> None:
    """rosidl's type support dispatch ``dlopen``s ``libsolarian_agent__rosidl_typesupport_*.so``
    by its bare name, which the loader looks up in the LD_LIBRARY_PATH the process started with
    (a sourced ``local_setup.sh`` would have set it).  Loaded here by path first, the bare-name
    ``dlopen`` finds them already loaded.  Child processes get the directory on LD_LIBRARY_PATH
    as well."""
    import ctypes

    for path in sorted(lib.glob(f"lib{PACKAGE}__rosidl_*.so")):
        ctypes.CDLL(str(path))
    parts = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if str(lib) not in parts:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([str(lib), *parts])


def _module(pkg: str, kind: str) -> Any:
    if pkg == PACKAGE:
        find_generated_interfaces()
    try:
        return importlib.import_module(f"{pkg}.{kind}")
    except ImportError as e:
        if pkg != PACKAGE:
            raise
        looked = ", ".join(str(d) for d in _generated_dirs())
        raise InterfacesNotBuiltError(
            f"the generated {PACKAGE}.{kind} interfaces do not import ({e}); build them with "
            f"`make ros` (or colcon build) and put the install prefix on AMENT_PREFIX_PATH; "
            f"looked in: {looked}") from e


@functools.cache
def interface_class(typename: str) -> Any:
    """The generated class of ``typename`` (``sensor_msgs/msg/Image``,
    ``std_srvs/srv/Trigger``, ``solarian_agent/srv/AgentCommand_Request``,
    ``solarian_agent/action/Skill_Goal`` ...)."""
    try:
        pkg, kind, name = typename.split("/")
    except ValueError:
        raise ValueError(f"not a ROS type name: {typename!r} (expected pkg/kind/Name)") from None
    if kind not in ("msg", "srv", "action"):
        raise ValueError(f"not a ROS type name: {typename!r} (kind must be msg, srv or action)")
    mod = _module(pkg, kind)
    base, _, part = name.rpartition("_")
    if kind != "msg" and base and part in _PARTS[kind] and not hasattr(mod, name):
        return getattr(getattr(mod, base), part)
    try:
        return getattr(mod, name)
    except AttributeError:
        raise ValueError(f"{pkg}.{kind} has no type {name!r} (from {typename!r})") from None


__all__ = ["InterfacesNotBuiltError", "find_generated_interfaces", "interface_class"]
