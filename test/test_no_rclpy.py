"""Every module outside solarian_agent/ros/ (and the ROS-free helpers in ros/, which only use
rosbags) imports with rclpy made unimportable."""

import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import solarian_agent

ROS_ONLY = ("solarian_agent.ros.",)
ROS_FREE_IN_ROS = {"solarian_agent.ros", "solarian_agent.rosmsg.bag", "solarian_agent.ros.convert",
                   "solarian_agent.ros.codec",
                   "solarian_agent.rosmsg.graph",
                   "solarian_agent.ros.components", "solarian_agent.ros.launch_plan",
                   "solarian_agent.ros.ros_types", "solarian_agent.ros.liveness",
                   "solarian_agent.ros.processes", "solarian_agent.ros.launcher",
                   "solarian_agent.ros.front_ends"}


def _modules() -> list[str]:
    out = []
    # the source package only (not the generated interfaces a ROS set-up adds to its path)
    src = [str(Path(solarian_agent.__file__).parent)]
    for m in pkgutil.walk_packages(src, "solarian_agent."):
        if m.name.startswith(ROS_ONLY) and m.name not in ROS_FREE_IN_ROS:
            continue
        out.append(m.name)
    return out


def test_every_core_module_imports_without_rclpy():
    mods = _modules()
    assert "solarian_agent.core.planner" in mods
    code = textwrap.dedent(f"""
        import importlib, sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                root = name.split(".")[0]
                if root in ("rclpy", "rcl_interfaces", "rosidl_runtime_py", "launch_ros",
                            "sensor_msgs",
                            "std_msgs", "geometry_msgs", "action_msgs", "builtin_interfaces",
                            "visualization_msgs", "diagnostic_msgs", "std_srvs", "lifecycle_msgs"):
                    raise ImportError(f"blocked for this test: {{name}}")
                return None
        sys.meta_path.insert(0, Block())
        failed = []
        for m in {mods!r}:
            try:
                importlib.import_module(m)
            except Exception as e:
                failed.append(f"{{m}}: {{type(e).__name__}}: {{e}}")
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
