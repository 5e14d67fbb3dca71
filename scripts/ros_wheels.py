#!/usr/bin/env python3
"""ROS 2 Jazzy from PyPI wheels: install, fix, build the package's interfaces, check.

    python scripts/ros_wheels.py install   # pip install -r requirements-ros-wheels.txt, fix
    python scripts/ros_wheels.py build     # the interfaces from CMakeLists.txt -> build/ros
    python scripts/ros_wheels.py check     # rclpy and the generated types import and talk
    python scripts/ros_wheels.py env       # shell exports for running nodes from a shell

Run it with the interpreter of the virtual environment the wheels go into (``make ros`` uses
``.venv/bin/python``).  What it works around, measured on Debian 12 / Python 3.11:

* every message wheel's ``share/<pkg>/cmake/*rosidl_generator_pyExport.cmake`` names the wheel
  builder's Python and numpy include directories (``/opt/python/cp311-cp311/...``); cmake
  refuses to generate until they name this interpreter's;
* ``BUILD_TESTING`` needs launch_testing's cmake package, which PyPI does not serve: the build
  is configured with ``-DBUILD_TESTING=OFF`` (the graph tests run under pytest instead);
* the generated Python extensions carry no RPATH; the build gives them one relative to the
  install prefix, so nothing but the wheels' own bootstrap (``ros_wheels_bootstrapper.pth``,
  which sets LD_LIBRARY_PATH for the wheels' libraries) is needed at run time.

The interfaces are installed into ``build/ros/install`` (an ament prefix).  The source tree
finds them there through ``AMENT_PREFIX_PATH`` (see ``solarian_agent/ros/__init__.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / "requirements-ros-wheels.txt"
BUILD = REPO / "build" / "ros"
PREFIX = BUILD / "install"

_PY_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
_NP_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/"
                         r"_core/include")


def _fail(msg: str) -> None:
    print(f"ros_wheels: {msg}", file=sys.stderr)
    sys.exit(1)


def _run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, **kw)  # type: ignore[call-overload]
    if r.returncode != 0:
        _fail(f"{cmd[0]} failed with exit code {r.returncode}")


def fix_cmake_exports(prefix: Path) -> int:
    """Point the wheels' cmake exports at this interpreter's include directories."""
    import numpy

    py_inc = sysconfig.get_paths()["include"]
    np_inc = numpy.get_include()
    if not Path(py_inc, "Python.h").is_file():
        _fail(f"Python.h is not in {py_inc}: install the Python development headers "
              "(Debian: python3-dev)")
    fixed = 0
    for path in sorted(prefix.glob("share/*/cmake/*Export.cmake")):
        text = path.read_text(encoding="utf-8")
        new = _NP_INCLUDE.sub(np_inc, _PY_INCLUDE.sub(py_inc, text))
        if new != text:
            path.write_text(new, encoding="utf-8")
            fixed += 1
    return fixed


def install() -> None:
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "-r", str(WHEELS)])
    fixed = fix_cmake_exports(Path(sys.prefix))
    print(f"ros_wheels: fixed the include directories in {fixed} cmake export files")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    prefix = sys.prefix
    env["AMENT_PREFIX_PATH"] = prefix
    env["CMAKE_PREFIX_PATH"] = prefix
    env["PATH"] = os.pathsep.join([str(Path(prefix, "bin")), env.get("PATH", "")])
    return env


# What the CMakeLists.txt reads, copied to build/ros/src: cmake refuses to export include
# directories inside its source directory, and .venv (numpy's headers) is inside the repository.
# (Symbolic links would not do: cmake's install(DIRECTORY) copies a linked directory as a link.)
SOURCES = ("CMakeLists.txt", "package.xml", "msg", "srv", "action", "solarian_agent", "launch",
           "config", "urdf")


def _stage_sources() -> Path:
    src = BUILD / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        dst = src / name
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        elif dst.exists() or dst.is_symlink():
            dst.unlink()
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, dst)
    return src


def build() -> None:
    for tool in ("cmake", "make"):
        if shutil.which(tool) is None:
            _fail(f"{tool} is not installed (Debian: apt-get install cmake build-essential)")
    src = _stage_sources()
    work = BUILD / "cmake"
    work.mkdir(parents=True, exist_ok=True)
    env = _env()
    _run(["cmake", str(src), "-DBUILD_TESTING=OFF", f"-DCMAKE_INSTALL_PREFIX={PREFIX}",
          f"-DPython3_EXECUTABLE={sys.executable}",
          "-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../../..", "-DCMAKE_BUILD_TYPE=Release"],
         cwd=work, env=env, stdout=subprocess.DEVNULL)
    jobs = str(max(1, os.cpu_count() or 1))
    _run(["cmake", "--build", ".", "--", f"-j{jobs}"], cwd=work, env=env,
         stdout=subprocess.DEVNULL)
    _run(["cmake", "--install", "."], cwd=work, env=env, stdout=subprocess.DEVNULL)
    print(f"ros_wheels: interfaces installed in {PREFIX}")


CHECK = """
import rclpy
from rclpy.node import Node
import solarian_agent.ros  # finds the generated interfaces through AMENT_PREFIX_PATH
from solarian_agent.ros.ros_types import interface_class
Skill = interface_class("solarian_agent/action/Skill")
State = interface_class("solarian_agent/msg/AgentState")
rclpy.init()
node = Node("ros_wheels_check")
node.create_publisher(State, "ros_wheels_check", 1).publish(State(status="idle"))
node.destroy_node()
rclpy.shutdown()
print("ros_wheels: rclpy", rclpy.__file__, "and the package's interfaces work")
"""


def check() -> None:
    env = dict(os.environ)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(
        p for p in (str(PREFIX), sys.prefix, env.get("AMENT_PREFIX_PATH", "")) if p)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # let the wheels' bootstrap run
    _run([sys.executable, "-c", CHECK], cwd=REPO, env=env)


def print_env() -> None:
    ament = os.pathsep.join([str(PREFIX), sys.prefix])
    print(f"export AMENT_PREFIX_PATH={ament}${{AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}}")
    print(f"export PATH={Path(sys.prefix, 'bin')}:$PATH")


def main(argv: list[str]) -> int:
    steps = {"install": install, "build": build, "check": check, "env": print_env}
    if len(argv) != 1 or argv[0] not in steps:
        print(f"usage: {Path(__file__).name} {{{'|'.join(steps)}}}", file=sys.stderr)
        return 2
    steps[argv[0]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
