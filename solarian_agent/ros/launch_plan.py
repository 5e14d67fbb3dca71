"""What the launch files start, as data (no ROS imports): nodes, parameters, processes.

``launch/sim.launch.py``, ``robot.launch.py`` and ``replay.launch.py`` declare the arguments
listed here and, in an OpaqueFunction, turn :func:`sim_plan` / :func:`robot_plan` /
:func:`replay_plan` into ``launch_ros`` Nodes and ``ExecuteProcess`` actions with
:func:`to_launch_actions`.  The graph contract test runs the real launch files against stand-in
``launch`` modules and checks the graph they start (:func:`spec_for`).  docs/ros.md documents
the same arguments.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..arm.description import describe
from ..rosmsg import graph

PKG = "solarian_agent"


@dataclass(frozen=True)
class Arg:
    name: str
    default: str
    description: str


@dataclass
class Planned:
    """A node (``package`` / ``executable``) or, with ``cmd``, a process to run."""

    package: str = PKG
    executable: str = ""
    name: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    arguments: list[str] = field(default_factory=list)
    remappings: list[tuple[str, str]] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    # restarted after respawn_delay_s when it dies (respawn:=true): the planner sees it back
    respawn: bool = False
    respawn_delay_s: float = 2.0


COMMON_ARGS = (
    Arg("namespace", "", "ROS namespace for every node of the graph"),
    Arg("config_file", "", "the agent: block YAML (default: share/solarian_agent/config/"
                           "controller.yaml)"),
    Arg("tool_set", "tidy", "skill tools: tidy (the tidy-up controller) | toy (test tools)"),
    Arg("pick", "scripted", "pick_object: scripted (the scripted pick) | policy (the learned "
                            "pick policy, config/skills/pick_policy.yaml)"),
    Arg("planner_provider", "", "override agent.planner.provider (rules | anthropic | openai); "
                                "'' = the config file's"),
    Arg("log_root", "", "episode log directory for the planner ('' = no logs)"),
    Arg("robot_state_publisher", "auto", "TF from joint_states and the URDF: auto (when "
                                         "robot_state_publisher is installed) | true | false"),
    Arg("rviz", "false", "start rviz2 with config/agent.rviz"),
    Arg("record", "false", "record every topic the graph publishes to an MCAP bag"),
    Arg("bag", "", "bag directory for record:=true (default: solarian_<time>)"),
    Arg("panel", "false", "serve the operator panel (a web page) on the graph"),
    Arg("panel_host", "127.0.0.1", "the panel's address (beyond loopback it needs the access "
                                   "token: $SOLARIAN_PANEL_TOKEN, else one is generated and "
                                   "logged)"),
    Arg("panel_port", "8765", "the panel's TCP port"),
)

RESPAWN_HELP = "restart a node of the package that dies (true | false)"
RESPAWN_DELAY = Arg("respawn_delay", "2.0", "seconds before a dead node is restarted")

SIM_ARGS = COMMON_ARGS + (
    Arg("respawn", "false", RESPAWN_HELP), RESPAWN_DELAY,
    Arg("sim", "2d", "simulator backend: 2d (the tabletop world) | mujoco (3D physics)"),
    Arg("seed", "0", "the simulator's first layout seed"),
    Arg("grasp_fail_p", "0.0", "probability a grasp fails (injected fault)"),
    Arg("slip_p", "0.0", "probability a held object slips (injected fault)"),
)

ROBOT_ARGS = COMMON_ARGS + (
    Arg("respawn", "true", RESPAWN_HELP), RESPAWN_DELAY,
    Arg("cameras", "overhead=0,wrist=2", "camera name=source pairs (device index, /dev/video* "
                                        "path or a video file)"),
    Arg("arm_config", "", "arm YAML (default: share/solarian_agent/config/arm_so101.yaml)"),
    Arg("port", "", "the servo bus's serial port ('' = the arm YAML's)"),
    Arg("simulated_bus", "false", "simulated servos on a pseudo-terminal (no arm attached)"),
    Arg("calibration_dir", "", "camera calibration files <camera>.yaml ('' = "
                               "~/.config/solarian_agent/cameras or $SOLARIAN_CALIBRATION_DIR)"),
    Arg("profile", "auto", "the robot profile from `solarian-agent bringup` (auto: "
                           "~/.config/solarian_agent/robot.yaml if it exists; none: ignore): "
                           "cameras, port, calibrations, camera frames"),
    Arg("require_ready", "true", "refuse to start on a profile whose pointing check did not "
                                 "pass"),
)

REPLAY_ARGS = (
    Arg("bag", "", "the recorded bag to replay (required)"),
    Arg("namespace", "", "ROS namespace the bag was recorded in"),
    Arg("config_file", "", "the agent: block YAML with the monitor: settings to evaluate"),
    Arg("tool_set", "tidy", "skill tools whose monitor questions are asked (catalogue)"),
    Arg("rate", "1.0", "playback rate"),
    Arg("delay", "3.0", "seconds before playback starts (lets the monitor come up)"),
    Arg("log_root", "", "episode log directory for the monitor's ticks"),
    Arg("record", "false", "record the replayed monitor's verdicts to out_bag"),
    Arg("out_bag", "", "bag directory for record:=true (default: <bag>_verdicts)"),
)

LAUNCH_ARGS = {"sim": SIM_ARGS, "robot": ROBOT_ARGS, "replay": REPLAY_ARGS}


def _true(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def has_package(name: str) -> bool:
    """Whether a ROS package is installed (in the ament index)."""
    try:
        from ament_index_python.packages import get_package_prefix

        get_package_prefix(name)
        return True
    except Exception:  # not installed, or no ament_index_python at all
        return False


def _optional_package(args: Mapping[str, str], arg: str, package: str) -> bool:
    """An optional part of the graph: ``auto`` starts it when installed, ``true`` requires it
    (a clear error before anything starts), ``false`` leaves it out."""
    value = str(args.get(arg, "auto")).strip().lower()
    if value == "auto":
        return has_package(package)
    if _true(value):
        if not has_package(package):
            raise ValueError(f"{arg}:={value} but the ROS package {package} is not installed")
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{arg}:={value!r} is not one of auto, true, false")


def _config(args: Mapping[str, str], share: Path) -> str:
    return args.get("config_file") or str(share / "config" / "controller.yaml")


def _urdf(share: Path, cameras: Mapping[str, Any] | None = None) -> str:
    """The description robot_state_publisher serves; ``cameras`` (name -> calibration): the
    cameras where bring-up measured them."""
    path = share / "urdf" / "so101.urdf"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:  # robot_state_publisher would only fail later, less clearly
        raise ValueError(f"the URDF for robot_state_publisher is missing: {path}: {e}") from e
    if cameras:
        from ..bringup.description import with_calibrated_cameras

        text = with_calibrated_cameras(text, cameras)
    return describe(text, share=share).urdf


def _agent_nodes(args: Mapping[str, str], share: Path, sim: str = "") -> list[Planned]:
    cfg = _config(args, share)
    pick = args.get("pick", "scripted") or "scripted"
    if pick not in ("scripted", "policy"):
        raise ValueError(f"pick:={pick!r} is not one of scripted, policy")
    skills: dict[str, Any] = {"config_file": cfg, "tool_set": args.get("tool_set", "tidy"),
                              "pick": pick}
    if sim:  # the skills point at the simulated scene's heights
        skills["sim"] = sim
    out = [Planned(executable="skills_node", name="skills", parameters=skills)]
    out.append(Planned(executable="monitor_node", name="monitor",
                       parameters={"config_file": cfg, "log_root": args.get("log_root", "")}))
    out.append(Planned(executable="planner_node", name="planner",
                       parameters={"config_file": cfg,
                                   "planner_provider": args.get("planner_provider", ""),
                                   "log_root": args.get("log_root", "")}))
    if _true(args.get("panel", "false")):
        out.append(Planned(executable="panel", name="panel", parameters={
            "config_file": cfg, "host": args.get("panel_host", "") or "127.0.0.1",
            "port": _port(args.get("panel_port", "8765"))}))
    return out


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port < 65536:
        raise ValueError(f"panel_port:={value!r} is not a TCP port (0..65535)")
    return port


# The topics config/agent.rviz names.  rviz keeps them absolute, so in a namespace the rviz
# node gets remappings onto the namespaced ones (a remapping rule matches the absolute name).
RVIZ_TOPICS = ("/robot_description", "/agent/markers", "/agent/view", "/overhead/image_raw",
               "/wrist/image_raw")


def rviz_remappings(namespace: str) -> list[tuple[str, str]]:
    if not namespace.strip("/"):
        return []
    return [(t, graph.expand(t.lstrip("/"), namespace)) for t in RVIZ_TOPICS]


def _viewers(args: Mapping[str, str], share: Path, cameras: Sequence[str], sim: bool,
             calibrations: Mapping[str, Any] | None = None) -> list[Planned]:
    # robot_description is the URDF's text (a str parameter: launch_ros keeps a plain Python
    # str a string; it does not YAML-parse it as it would a substitution's output)
    out = []
    if _optional_package(args, "robot_state_publisher", "robot_state_publisher"):
        out.append(Planned(package="robot_state_publisher", executable="robot_state_publisher",
                           name="robot_state_publisher",
                           parameters={"robot_description": _urdf(share, calibrations)}))
    if _true(args.get("rviz", "false")):
        if not has_package("rviz2"):
            raise ValueError("rviz:=true but the ROS package rviz2 is not installed")
        out.append(Planned(package="rviz2", executable="rviz2", name="rviz",
                           arguments=["-d", str(share / "config" / "agent.rviz")],
                           remappings=rviz_remappings(args.get("namespace", ""))))
    if _true(args.get("record", "false")):
        _require_ros2_cli("record:=true")
        bag = args.get("bag") or f"solarian_{time.strftime('%Y%m%d_%H%M%S')}"
        ns = args.get("namespace", "")
        topics = [graph.expand(t, ns) for t in graph.recorded_topics(cameras, sim)]
        out.append(Planned(cmd=["ros2", "bag", "record", "-s", "mcap", "-o", bag, *topics]))
    return out


def _require_ros2_cli(what: str) -> None:
    if shutil.which("ros2") is None:
        raise ValueError(f"{what} runs `ros2 bag`, and the ros2 command is not installed "
                         "(rosbag2 is part of a full ROS 2 installation)")


def sim_plan(args: Mapping[str, str], share: Path) -> list[Planned]:
    from ..sim.backend import SIM_BACKENDS

    cfg = _config(args, share)
    sim = args.get("sim", "2d") or "2d"
    if sim not in SIM_BACKENDS:
        raise ValueError(f"sim:={sim!r} is not a simulator backend; allowed: "
                         f"{', '.join(SIM_BACKENDS)}")
    check_sim_cameras(cfg)
    nodes = [Planned(executable="sim_node", name="sim_world",
                     parameters={"config_file": cfg, "sim": sim,
                                 "seed": int(args.get("seed", "0") or 0),
                                 "grasp_fail_p": float(args.get("grasp_fail_p", "0") or 0),
                                 "slip_p": float(args.get("slip_p", "0") or 0)})]
    nodes += _agent_nodes(args, share, sim)
    return _respawn(nodes, args, False) + _viewers(args, share, graph.DEFAULT_SIM_CAMERAS,
                                                   sim=True)


def _respawn(nodes: list[Planned], args: Mapping[str, str], default: bool) -> list[Planned]:
    """respawn:= / respawn_delay:= on every node of the package (on by default for the robot:
    a node that dies comes back, the planner sees it back and the run goes on)."""
    on = _true(args.get("respawn", "true" if default else "false") or default)
    delay = float(args.get("respawn_delay", "2.0") or 2.0)
    if not (math.isfinite(delay) and delay >= 0):
        raise ValueError(f"respawn_delay:={delay} must be a number >= 0")
    for n in nodes:
        if n.package == PKG and not n.cmd:
            n.respawn, n.respawn_delay_s = on, delay
    return nodes


def check_sim_cameras(config_file: str) -> None:
    """The config's cameras are the simulator's (ValueError naming the one that is not)."""
    from ..core.errors import ConfigError
    from .components import load_config

    try:
        cfg = load_config(config_file)
        for i, cam in enumerate(cfg.cameras):
            if cam not in graph.DEFAULT_SIM_CAMERAS:
                raise ConfigError(f"agent.cameras[{i}]", f"the simulator has no camera {cam!r}; "
                                  f"its cameras: {', '.join(graph.DEFAULT_SIM_CAMERAS)}")
    except ConfigError as e:
        raise ValueError(f"config_file:={config_file}: {e}") from None


def camera_sources(spec: str) -> list[tuple[str, str]]:
    """'overhead=0,wrist=/dev/video2' -> [(overhead, 0), (wrist, /dev/video2)]."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, source = item.partition("=")
        out.append((name.strip(), source.strip() or "0"))
    return out


def robot_plan(args: Mapping[str, str], share: Path) -> list[Planned]:
    """The real robot's graph, from the robot profile where one is given
    (:mod:`.launch_profile`).  Every camera the skills point through must be calibrated:
    a missing calibration stops the launch before anything starts, naming the camera, the
    file and the command that makes it."""
    from ..hw.camera.calibration import calibration_path
    from .launch_profile import apply_profile

    profiled = apply_profile(args)
    args = profiled.args
    cams = camera_sources(args.get("cameras", "overhead=0,wrist=2"))
    names_ = [c for c, _ in cams]
    cal_dir = args.get("calibration_dir", "")
    require_calibrations(args.get("tool_set", "tidy"), names_, cal_dir)
    nodes = [Planned(executable="camera_node", name=f"camera_{c}",
                     parameters={"camera": c, "source": s,
                                 "frame_id": f"{c}_camera_optical",
                                 "calibration_file": str(calibration_path(c, cal_dir or None))})
             for c, s in cams]
    nodes.append(Planned(executable="arm_node", name="arm", parameters={
        "arm_config": args.get("arm_config") or str(share / "config" / "arm_so101.yaml"),
        "port": args.get("port", ""), "simulated_bus": _true(args.get("simulated_bus", ""))}))
    agents = _agent_nodes(args, share)
    for n in agents:
        n.parameters["cameras"] = ",".join(names_)
        if n.name == "panel" and profiled.profile is not None:
            n.parameters["profile"] = profiled.profile.path
        if n.name in ("skills", "planner"):
            n.parameters["camera_models"] = "calibrated"
            n.parameters["calibration_dir"] = cal_dir
    return _respawn(nodes + agents, args, True) + _viewers(
        args, share, names_, sim=False, calibrations=profiled.calibrations)


def require_calibrations(tool_set: str, cameras: Sequence[str], calibration_dir: str) -> None:
    """Raise ``ValueError`` (the launch stops) when a camera the tools point through is not
    among ``cameras`` or has no usable calibration file."""
    from ..core.errors import ConfigError
    from ..hw.camera.model import check_calibrations
    from .components import pointing_cameras
    from .components import tool_set as tools_of

    required = pointing_cameras(tools_of(tool_set))
    absent = [c for c in required if c not in cameras]
    if absent:
        raise ValueError(f"the skills point through camera(s) {', '.join(absent)} "
                         f"({', '.join(t for c in absent for t in required[c])}), which "
                         f"the cameras argument ({','.join(cameras) or 'none'}) does not name")
    try:
        check_calibrations(required, calibration_dir or None)
    except ConfigError as e:
        raise ValueError(str(e)) from None


def replay_plan(args: Mapping[str, str], share: Path, cameras: Sequence[str] | None = None
                ) -> list[Planned]:
    bag = args.get("bag", "")
    if not bag:
        raise ValueError("replay.launch.py needs bag:=<recorded bag directory>")
    cfg = _config(args, share)
    if cameras is None:
        from .components import load_config

        cameras = list(load_config(cfg).cameras)
    # the package's own player (rosbags; no rosbag2): compressed images are decoded onto the
    # raw topics the monitor subscribes, /clock carries the episode's time
    out = [
        Planned(executable="bag_player", name="bag_player",
                parameters={"bag": bag, "rate": float(args.get("rate", "1.0") or 1.0),
                            "delay": float(args.get("delay", "3.0") or 0.0)}),
        Planned(executable="skills_node", name="skills",
                parameters={"config_file": cfg, "tool_set": args.get("tool_set", "tidy"),
                            "use_sim_time": True}),
        Planned(executable="monitor_node", name="monitor",
                parameters={"config_file": cfg, "log_root": args.get("log_root", ""),
                            "use_sim_time": True}),
    ]
    if _true(args.get("record", "false")):
        out_bag = args.get("out_bag") or f"{bag.rstrip('/')}_verdicts"
        out.append(Planned(cmd=["ros2", "bag", "record", "-s", "mcap", "-o", out_bag,
                                graph.expand("monitor/verdicts", args.get("namespace", ""))]))
    return out


PLANS = {"sim": sim_plan, "robot": robot_plan, "replay": replay_plan}


def to_launch_actions(plan: Sequence[Planned], namespace: str, *, Node: Any,  # noqa: N803
                      ExecuteProcess: Any) -> list[Any]:  # noqa: N803
    """launch_ros Nodes and launch ExecuteProcess actions for a plan (classes passed in)."""
    actions = []
    for p in plan:
        if p.cmd:
            actions.append(ExecuteProcess(cmd=list(p.cmd), output="screen"))
            continue
        kw: dict[str, Any] = {"package": p.package, "executable": p.executable,
                              "name": p.name, "namespace": namespace, "output": "screen"}
        if p.parameters:
            kw["parameters"] = [dict(p.parameters)]
        if p.arguments:
            kw["arguments"] = list(p.arguments)
        if p.remappings:
            kw["remappings"] = list(p.remappings)
        if p.respawn:
            kw["respawn"], kw["respawn_delay"] = True, p.respawn_delay_s
        actions.append(Node(**kw))
    return actions


# ------------------------------------------------------------------------------------------
# the graph a plan starts (for the contract test and docs)
# ------------------------------------------------------------------------------------------
def external_spec(package: str, executable: str, cameras: Sequence[str]) -> graph.NodeSpec:
    """The endpoints of the non-package nodes the launch files start."""
    if package == "robot_state_publisher":
        return graph.NodeSpec(executable, "robot_state_publisher", (
            graph.Endpoint("subscription", "joint_states", "sensor_msgs/msg/JointState",
                           graph.RELIABLE, bridged=False),))
    if package == "image_transport":  # republish compressed -> raw (one per camera)
        return graph.NodeSpec(executable, "republish", (
            graph.Endpoint("subscription", "in/compressed", graph.T_COMPRESSED_IMAGE,
                           graph.SENSOR_DATA, bridged=False),
            graph.Endpoint("publisher", "out", "sensor_msgs/msg/Image", graph.SENSOR_DATA,
                           bridged=False)))
    if package == "rviz2":  # the displays of config/agent.rviz
        eps = [graph.Endpoint("subscription", f"{c}/image_raw", "sensor_msgs/msg/Image",
                              graph.SENSOR_DATA, bridged=False) for c in cameras]
        eps += [graph.Endpoint("subscription", "agent/view", "sensor_msgs/msg/Image",
                               graph.LATEST, bridged=False),
                graph.Endpoint("subscription", "agent/markers",
                               "visualization_msgs/msg/MarkerArray", graph.RELIABLE,
                               bridged=False)]
        return graph.NodeSpec(executable, "rviz", tuple(eps))
    raise KeyError(f"no spec for {package}/{executable}")


def spec_for(package: str, executable: str, parameters: Mapping[str, Any],
             graph_tools: Sequence[str], cameras: Sequence[str]) -> graph.NodeSpec:
    """The spec of a launched node given its parameters (cameras and tools resolved the way
    the node resolves them)."""
    if package != PKG:
        return external_spec(package, executable, cameras)
    from .components import load_config, tool_names

    params = dict(parameters)
    if executable == "camera_node":
        return graph.camera_node(str(params.get("camera", "overhead")))
    if executable == "arm_node":
        return graph.arm_node()
    if executable == "sim_node":
        return graph.sim_node(graph.DEFAULT_SIM_CAMERAS)
    cams = [c for c in str(params.get("cameras", "")).split(",") if c] or list(
        load_config(str(params.get("config_file", ""))).cameras)
    if executable == "skills_node":
        return graph.skills_node(tool_names(str(params.get("tool_set", "tidy"))), cams)
    if executable == "monitor_node":
        return graph.monitor_node(cams)
    if executable == "planner_node":
        tools = [t for t in str(params.get("tools", "")).split(",") if t] or list(graph_tools)
        return graph.planner_node(cams, tools)
    if executable == "chat":
        return graph.chat_node()
    if executable == "panel":
        return graph.panel_node(cams)
    if executable == "bag_player":
        topics = [t for c in cams for t in (f"{c}/image_raw", f"{c}/image_raw/compressed")]
        return graph.bag_player_node(topics + [t for t, _, _ in graph.replay_topics(())])
    raise KeyError(f"unknown executable {executable!r}")


__all__ = ["Arg", "LAUNCH_ARGS", "PLANS", "Planned", "RVIZ_TOPICS", "camera_sources",
           "external_spec", "replay_plan", "require_calibrations", "robot_plan",
           "rviz_remappings", "sim_plan", "spec_for", "to_launch_actions"]


def share_dir(launch_file: str | Path) -> Path:
    """The installed share directory, or the source tree when run from a checkout."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("solarian_agent"))
    except Exception:  # running from the source tree
        return Path(launch_file).resolve().parent.parent


def launch_description(kind: str, launch_file: str | Path) -> Any:
    """The LaunchDescription of ``launch/<kind>.launch.py``: its arguments declared, and the
    nodes of :data:`PLANS` built from their values when the launch runs.  ``launch`` and
    ``launch_ros`` are imported here, so this module stays importable without ROS."""
    from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from launch import LaunchDescription

    share = share_dir(launch_file)

    def setup(context: Any, *args: Any, **kwargs: Any) -> Any:
        values = {a.name: LaunchConfiguration(a.name).perform(context)
                  for a in LAUNCH_ARGS[kind]}
        plan = PLANS[kind](values, share)
        return to_launch_actions(plan, values.get("namespace", ""), Node=Node,
                                 ExecuteProcess=ExecuteProcess)

    return LaunchDescription(
        [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
         for a in LAUNCH_ARGS[kind]]
        + [OpaqueFunction(function=setup)])
