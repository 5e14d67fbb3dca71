"""The ROS graph contract, checked without ROS.

* The launch files are executed against stand-in ``launch`` / ``launch_ros`` modules that record
  the Nodes and processes they start; each node's endpoints come from the spec its shell
  declares (solarian_agent.rosmsg.graph).  In every launch (and with a namespace): every
  subscription has a publisher of the same type with compatible QoS, every service / action
  client has exactly one server of the same type.
* Each node's core component, built as the node builds it (solarian_agent.ros.components), has
  on its private Bus exactly the endpoints its spec bridges, with the same names and types.
* The embedded run (solarian_agent.system, everything on one Bus) uses the same names and types
  as the ROS graph, including the services it calls and the actions it sends goals to.
* Build files: every interface file is generated, every node executable is installed.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from solarian_agent.core import names
from solarian_agent.core.clock import FakeClock
from solarian_agent.core.transport import Bus, QoS
from solarian_agent.ros import components, launch_plan
from solarian_agent.rosmsg import graph, graph_check
from solarian_agent.rosmsg.interfaces import interface_files

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "launch"


# ------------------------------------------------------------------------------------------
# stand-in launch modules
# ------------------------------------------------------------------------------------------
class _Rec:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs


class _LaunchConfiguration:
    def __init__(self, name: str, default: Any = None) -> None:
        self.name = name

    def perform(self, context: Any) -> str:
        return str(context.launch_configurations[self.name])


class _Declare(_Rec):
    @property
    def name(self) -> str:
        return str(self.args[0])


class _Opaque(_Rec):
    pass


class _Node(_Rec):
    pass


class _Process(_Rec):
    pass


class _Context:
    def __init__(self, values: dict[str, str]) -> None:
        self.launch_configurations = values


@pytest.fixture
def fake_launch(monkeypatch, tmp_path):
    # the robot launch needs its cameras calibrated: files describing the simulator's
    from solarian_agent.testing.calibrations import write_sim_calibrations

    write_sim_calibrations(tmp_path / "cameras")
    monkeypatch.setenv("SOLARIAN_CALIBRATION_DIR", str(tmp_path / "cameras"))
    mods = {
        "launch": types.ModuleType("launch"),
        "launch.actions": types.ModuleType("launch.actions"),
        "launch.substitutions": types.ModuleType("launch.substitutions"),
        "launch_ros": types.ModuleType("launch_ros"),
        "launch_ros.actions": types.ModuleType("launch_ros.actions"),
    }
    mods["launch"].LaunchDescription = lambda entities: list(entities)
    mods["launch.actions"].DeclareLaunchArgument = _Declare
    mods["launch.actions"].OpaqueFunction = _Opaque
    mods["launch.actions"].ExecuteProcess = _Process
    mods["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    mods["launch_ros.actions"].Node = _Node
    for k, m in mods.items():
        monkeypatch.setitem(sys.modules, k, m)
    # a full ROS installation: robot_state_publisher, rviz2 and the ros2 command are there
    monkeypatch.setattr(launch_plan, "has_package", lambda name: True)
    monkeypatch.setattr(launch_plan, "_require_ros2_cli", lambda what: None)
    return mods


def test_without_the_optional_ros_packages_the_plan_still_starts_the_graph(monkeypatch):
    """Only PyPI's ROS: robot_state_publisher (auto) is left out, asking for it or for rviz is
    a clear error before anything starts, never a launch that fails half way."""
    monkeypatch.setattr(launch_plan, "has_package", lambda name: False)
    share = components.share_dir()
    plan = launch_plan.sim_plan({}, share)
    assert {p.executable for p in plan} == {"sim_node", "skills_node", "monitor_node",
                                             "planner_node"}
    with pytest.raises(ValueError, match="robot_state_publisher is not installed"):
        launch_plan.sim_plan({"robot_state_publisher": "true"}, share)
    with pytest.raises(ValueError, match="rviz2 is not installed"):
        launch_plan.sim_plan({"rviz": "true"}, share)
    with pytest.raises(ValueError, match="not one of auto, true, false"):
        launch_plan.sim_plan({"robot_state_publisher": "maybe"}, share)
    monkeypatch.setattr(launch_plan.shutil, "which", lambda cmd: None)
    with pytest.raises(ValueError, match="ros2 command is not installed"):
        launch_plan.sim_plan({"record": "true"}, share)


def run_launch(kind: str, **overrides: str) -> tuple[list[_Node], list[_Process], dict]:
    path = LAUNCH / f"{kind}.launch.py"
    spec = importlib.util.spec_from_file_location(f"_launch_{kind}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    entities = mod.generate_launch_description()
    declared = {e.name: e.kwargs["default_value"] for e in entities if isinstance(e, _Declare)}
    unknown = set(overrides) - set(declared)
    assert not unknown, f"{kind}.launch.py has no arguments {unknown}"
    values = {**declared, **overrides}
    actions: list[Any] = []
    for e in entities:
        if isinstance(e, _Opaque):
            actions += e.kwargs["function"](_Context(values))
    return ([a for a in actions if isinstance(a, _Node)],
            [a for a in actions if isinstance(a, _Process)], values)


def launched_graph(nodes: list[_Node], processes: list[_Process], namespace: str = ""
                   ) -> list[graph_check.LaunchedNode]:
    tools: list[str] = []
    for n in nodes:
        if n.kwargs["executable"] == "skills_node":
            tools = components.tool_names(n.kwargs["parameters"][0]["tool_set"])
    cams: list[str] = []
    for n in nodes:
        if n.kwargs["executable"] == "camera_node":
            cams.append(n.kwargs["parameters"][0]["camera"])
        if n.kwargs["executable"] == "sim_node":
            cams = list(graph.DEFAULT_SIM_CAMERAS)
    out = []
    for n in nodes:
        k = n.kwargs
        params = k.get("parameters", [{}])[0]
        spec = launch_plan.spec_for(k["package"], k["executable"], params, tools, cams)
        out.append(graph_check.LaunchedNode(spec, k.get("name", ""), k.get("namespace", ""),
                                      tuple(k.get("remappings", ()))))
    return out


CHAT = [graph.chat_node()]


# ------------------------------------------------------------------------------------------
# launch files
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [
    {},
    {"rviz": "true", "record": "true", "bag": "/tmp/x"},
    {"namespace": "robot1", "rviz": "true"},
    {"tool_set": "toy", "planner_provider": "rules"},
])
def test_sim_launch_graph_is_consistent(fake_launch, overrides):
    nodes, procs, values = run_launch("sim", **overrides)
    exes = sorted(n.kwargs["executable"] for n in nodes)
    assert {"sim_node", "skills_node", "planner_node", "robot_state_publisher"} <= set(exes)
    assert "monitor_node" in exes
    g = launched_graph(nodes, procs, values["namespace"])
    assert graph_check.check_graph(g, CHAT) == []
    if overrides.get("namespace"):
        assert all(n.namespace == "robot1" for n in g)
        assert all(full.startswith("/robot1/") for n in g for _, full in n.resolved())


@pytest.mark.parametrize("kind,extra", [("sim", {}),
                                        ("robot", {"cameras": "overhead=0,wrist=2",
                                                   "simulated_bus": "true"})])
def test_panel_true_adds_the_panel_node_to_a_consistent_graph(fake_launch, kind, extra):
    """``panel:=true``: the operator panel is a node of the graph; every topic it reads has a
    publisher there and every service it calls a server."""
    nodes, procs, values = run_launch(kind, panel="true", panel_port="0", namespace="op",
                                      **extra)
    (panel,) = [n for n in nodes if n.kwargs["executable"] == "panel"]
    params = {k: v for d in panel.kwargs["parameters"] for k, v in d.items()}
    assert params["port"] == 0 and params["host"] == "127.0.0.1" and "config_file" in params
    g = launched_graph(nodes, procs, values["namespace"])
    assert "panel" in {n.spec.name for n in g}
    assert graph_check.check_graph(g, CHAT) == []
    nodes, _, _ = run_launch(kind, **extra)
    assert "panel" not in {n.kwargs["executable"] for n in nodes}  # off by default


def test_a_bad_panel_port_is_named():
    with pytest.raises(ValueError, match="panel_port:='http'"):
        launch_plan.sim_plan({"panel": "true", "panel_port": "http"}, components.share_dir())


def test_sim_launch_records_mcap_of_every_published_topic(fake_launch):
    nodes, procs, _ = run_launch("sim", record="true", bag="/tmp/b", namespace="ns")
    (rec,) = procs
    cmd = rec.kwargs["cmd"]
    assert cmd[:7] == ["ros2", "bag", "record", "-s", "mcap", "-o", "/tmp/b"]
    published = {full for n in launched_graph(nodes, procs, "ns") for e, full in n.resolved()
                 if e.kind == "publisher"}
    # plus what the operator's tools publish into the graph (chat client: operator events)
    assert set(cmd[7:]) == published | {"/ns/operator/events"}


def test_robot_launch_graph_is_consistent(fake_launch):
    nodes, procs, _ = run_launch("robot", rviz="true", cameras="overhead=0,wrist=/dev/video2")
    exes = [n.kwargs["executable"] for n in nodes]
    assert exes.count("camera_node") == 2 and "arm_node" in exes and "sim_node" not in exes
    cams = {n.kwargs["parameters"][0]["camera"]: n.kwargs["parameters"][0]["source"]
            for n in nodes if n.kwargs["executable"] == "camera_node"}
    assert cams == {"overhead": "0", "wrist": "/dev/video2"}
    assert graph_check.check_graph(launched_graph(nodes, procs), CHAT) == []


def test_robot_launch_points_through_calibrated_cameras(fake_launch, tmp_path):
    nodes, _, _ = run_launch("robot", cameras="overhead=0,wrist=2",
                             calibration_dir=str(tmp_path / "cameras"))
    params = {n.kwargs["name"]: n.kwargs["parameters"][0] for n in nodes}
    assert params["camera_overhead"]["calibration_file"] == str(tmp_path / "cameras" /
                                                                "overhead.yaml")
    for node in ("skills", "planner"):
        assert params[node]["camera_models"] == "calibrated"
        assert params[node]["calibration_dir"] == str(tmp_path / "cameras")
    sim_nodes, _, _ = run_launch("sim")
    assert all("camera_models" not in n.kwargs["parameters"][0] for n in sim_nodes
               if n.kwargs.get("parameters"))  # the simulator keeps its own models


def test_a_robot_launch_without_a_calibration_stops_naming_camera_file_and_command(
        fake_launch, tmp_path):
    empty = tmp_path / "none"
    with pytest.raises(ValueError) as e:
        run_launch("robot", cameras="overhead=0,wrist=2", calibration_dir=str(empty))
    msg = str(e.value)
    assert msg.startswith(f"camera 'overhead' has no calibration: {empty / 'overhead.yaml'}.")
    assert "The skills point through it (pick_object, place_at)." in msg
    assert "solarian-agent calibrate-camera intrinsics --camera overhead" in msg
    # the wrist camera is not pointed through: it needs no calibration
    from solarian_agent.testing.calibrations import write_sim_calibrations

    write_sim_calibrations(empty, ["overhead"])
    run_launch("robot", cameras="overhead=0,wrist=2", calibration_dir=str(empty))
    with pytest.raises(ValueError, match=r"point through camera\(s\) overhead \(pick_object, "
                                         r"place_at\), which the cameras argument \(wrist\)"):
        run_launch("robot", cameras="wrist=2", calibration_dir=str(empty))


def test_robot_launch_with_one_camera_is_consistent(fake_launch):
    nodes, procs, _ = run_launch("robot", cameras="overhead=0")
    assert graph_check.check_graph(launched_graph(nodes, procs), CHAT) == []


def test_replay_launch_plays_the_bag_into_the_monitor(fake_launch):
    with pytest.raises(ValueError, match="bag:="):
        run_launch("replay")
    nodes, procs, _ = run_launch("replay", bag="/data/ep1", record="true")
    nsn, nsp, _ = run_launch("replay", bag="/data/ep1", namespace="r2")
    assert graph_check.check_graph(launched_graph(nsn, nsp, "r2"), CHAT) == []
    # the package's own player (no rosbag2 needed): /clock and the replayed topics
    play = next(n for n in nodes if n.kwargs["executable"] == "bag_player")
    assert play.kwargs["parameters"][0]["bag"] == "/data/ep1"
    monitor = next(n for n in nodes if n.kwargs["executable"] == "monitor_node")
    assert monitor.kwargs["parameters"][0]["use_sim_time"] is True
    g = launched_graph(nodes, procs)
    assert graph_check.check_graph(g, CHAT) == []
    rec = next(p for p in procs if p.kwargs["cmd"][:3] == ["ros2", "bag", "record"])
    assert rec.kwargs["cmd"][-1] == "/monitor/verdicts"
    # a bag with compressed images (the embedded recorder's) reaches the monitor raw: the
    # player decodes them onto the raw topics, and publishes the clock the nodes follow
    feeds = {full: n.label for n in g for e, full in n.resolved() if e.kind == "publisher"}
    assert feeds["/wrist/image_raw"] == "/bag_player"
    assert feeds["/clock"] == "/bag_player"
    assert not any(n.kwargs["package"] == "image_transport" for n in nodes)


def test_rviz_follows_the_namespace(fake_launch):
    """config/agent.rviz names absolute topics; in a namespace the rviz node is remapped onto
    the namespaced ones (otherwise it shows nothing)."""
    text = (ROOT / "config" / "agent.rviz").read_text()
    assert set(re.findall(r"Value: (/[\w/]+)\s*$", text, re.M)) == set(launch_plan.RVIZ_TOPICS)
    nodes, _, _ = run_launch("sim", rviz="true", namespace="robot1")
    (rviz,) = [n for n in nodes if n.kwargs["executable"] == "rviz2"]
    assert dict(rviz.kwargs["remappings"]) == {t: "/robot1" + t for t in launch_plan.RVIZ_TOPICS}
    nodes, _, _ = run_launch("robot", rviz="true")
    (rviz,) = [n for n in nodes if n.kwargs["executable"] == "rviz2"]
    assert not rviz.kwargs.get("remappings")


def test_launch_parameters_keep_their_types(fake_launch):
    """Launch files pass plain Python values (launch_ros keeps a str a str); each must have
    the type the node declares, or rclpy refuses it at declare time."""
    declared = {  # (executable, parameter) -> type of the node's default
        ("sim_node", "seed"): int, ("sim_node", "grasp_fail_p"): float,
        ("sim_node", "slip_p"): float, ("sim_node", "sim"): str, ("skills_node", "sim"): str,
        ("skills_node", "pick"): str, ("camera_node", "source"): str,
        ("camera_node", "camera"): str, ("camera_node", "frame_id"): str,
        ("arm_node", "simulated_bus"): bool, ("arm_node", "port"): str,
        ("arm_node", "arm_config"): str, ("skills_node", "tool_set"): str,
        ("planner_node", "planner_provider"): str, ("planner_node", "log_root"): str,
        ("monitor_node", "log_root"): str, ("bag_player", "bag"): str,
        ("bag_player", "rate"): float, ("bag_player", "delay"): float,
        ("camera_node", "calibration_file"): str,
        ("skills_node", "camera_models"): str, ("skills_node", "calibration_dir"): str,
        ("planner_node", "camera_models"): str, ("planner_node", "calibration_dir"): str,
    }
    seen = set()
    for kind, over in (("sim", {"seed": "3", "grasp_fail_p": "0", "slip_p": "1",
                                "sim": "mujoco"}),
                       ("robot", {"cameras": "overhead=0,wrist=/dev/video2"}),
                       ("replay", {"bag": "/data/ep1"})):
        nodes, _, _ = run_launch(kind, **over)
        for n in nodes:
            exe = n.kwargs["executable"]
            for name, value in n.kwargs.get("parameters", [{}])[0].items():
                want = {"config_file": str, "cameras": str, "use_sim_time": bool}.get(
                    name, declared.get((exe, name)))
                if exe == "robot_state_publisher":
                    want = str
                assert want is not None, f"{exe}: parameter {name} is not known here"
                assert type(value) is want, f"{exe}.{name}={value!r} is not a {want.__name__}"
                seen.add((exe, name))
    assert ("robot_state_publisher", "robot_description") in seen
    rsp = next(n for n in run_launch("sim")[0]
               if n.kwargs["executable"] == "robot_state_publisher")
    assert rsp.kwargs["parameters"][0]["robot_description"].lstrip().startswith("<")


def test_check_graph_catches_mismatches():
    cams = ["overhead"]
    good = [graph_check.LaunchedNode(graph.sim_node(("overhead",))),
            graph_check.LaunchedNode(graph.skills_node(["wait"], cams)),
            graph_check.LaunchedNode(graph.monitor_node(cams)),
            graph_check.LaunchedNode(graph.planner_node(cams, ["wait"]))]
    probs = graph_check.check_graph(good, CHAT)
    assert probs == []
    # a reliable image subscription never matches a best-effort camera
    bad_qos = graph.NodeSpec("x", "viewer", (graph.Endpoint(
        "subscription", "overhead/image_raw", names.T_IMAGE, QoS(depth=1)),))
    # transient local wanted from a volatile publisher
    bad_dur = graph.NodeSpec("x", "late", (graph.Endpoint(
        "subscription", "joint_states", names.T_JOINT_STATE, QoS(depth=1,
                                                                 transient_local=True)),))
    bad_type = graph.NodeSpec("x", "typo", (graph.Endpoint(
        "subscription", "agent/state", names.T_AGENT_EVENT, QoS()),))
    no_server = graph.NodeSpec("x", "caller", (graph.Endpoint(
        "action_client", "skills/fly", names.T_SKILL_ACTION),))
    probs = graph_check.check_graph(good + [graph_check.LaunchedNode(s) for s in
                                      (bad_qos, bad_dur, bad_type, no_server)], CHAT)
    text = "\n".join(probs)
    assert "best effort but the subscription wants reliable" in text
    assert "transient local but the publisher is volatile" in text
    assert "/agent/state as solarian_agent/msg/AgentEvent" in text
    assert "skills/fly" in text and "no node in the graph serves it" in text
    assert len(probs) == 4
    # a remapping that leads nowhere, and two servers of one service
    moved = [graph_check.LaunchedNode(graph.sim_node(("overhead",)), remappings=(
        ("joint_states", "arm/joint_states"),)), *good[1:],
        graph_check.LaunchedNode(graph.skills_node(["wait"], cams), name="skills2")]
    text = "\n".join(graph_check.check_graph(moved, CHAT))
    assert "subscribes /joint_states" in text and "has 2 servers" in text
    # operator/events comes from the sim's e-stop as well as the chat client
    assert graph_check.check_graph(good, []) == []
    no_sim = [graph_check.LaunchedNode(graph.skills_node(["wait"], cams)),
              graph_check.LaunchedNode(graph.planner_node(cams, ["wait"]))]
    assert any("operator/events" in p for p in graph_check.check_graph(no_sim, []))


def test_namespaces_and_remapping_resolve_like_ros():
    assert graph.expand("agent/state", "") == "/agent/state"
    assert graph.expand("agent/state", "/r1/") == "/r1/agent/state"
    assert graph.expand("/abs", "r1") == "/abs"
    assert graph_check.resolve("joint_states", "r1", [("joint_states", "arm/js")]) == "/r1/arm/js"
    assert graph_check.resolve("joint_states", "r1", [("/r1/joint_states", "/js")]) == "/js"


# ------------------------------------------------------------------------------------------
# node specs vs the core components (the same names in-process and in the graph)
# ------------------------------------------------------------------------------------------
_COUNTERPART = {"publisher": "publisher", "subscription": "subscription",
                "service": "service", "action_server": "action_server"}
# endpoints a core creates that stay inside its node (not bridged on purpose)
_INTERNAL = {
    ("monitor", "publisher", names.JOINT_COMMANDS),  # ArmPort for the stall tripwire: reads only
    ("planner", "publisher", names.JOINT_COMMANDS),  # ArmPort for readings: reads only
    ("planner", "subscription", names.AGENT_STATE),  # the markers view of the plan
}


@pytest.fixture(scope="module")
def cfg():
    return components.load_config()


def _cores(cfg):
    clock = FakeClock()
    skills = components.build_skills_core(clock, cfg, tools="tidy")
    catalogue = [s.as_dict() for s in skills.parts["executor"].specs.values()]
    return {
        "sim": components.build_sim_core(clock, cfg),
        "skills": skills,
        "skills_toy": components.build_skills_core(clock, cfg, tools="toy"),
        "monitor": components.build_monitor_core(clock, cfg, catalogue=catalogue),
        "planner": components.build_planner_core(clock, cfg),
    }


def test_monitor_core_is_built_at_start_when_the_catalogue_is_remote(cfg):
    """In the node, the engine needs skills/catalogue: built at start, after the bridge."""
    bus = Bus()
    core = components.build_monitor_core(FakeClock(), cfg, bus=bus)
    assert core.parts["monitor"] is None
    core.loops[0].fn()  # ticking before start does nothing
    with pytest.raises(Exception, match="skills/catalogue"):
        core.start()  # no server yet: the node retries
    skills = components.build_skills_core(FakeClock(), cfg, bus=bus)
    core.start()
    assert core.parts["monitor"] is not None
    assert core.parts["monitor"].tools == set(skills.parts["executor"].specs)


def test_each_core_has_exactly_the_bridged_endpoints(cfg):
    for label, core in _cores(cfg).items():
        node = core.spec.name
        on_bus = {(e.kind, e.name): e.type for e in core.bus.endpoints}
        for e in core.spec.endpoints:
            if not e.bridged or e.kind not in _COUNTERPART:
                continue
            key = (_COUNTERPART[e.kind], e.name)
            assert key in on_bus, f"{label}: spec {e.kind} {e.name} has no {key[0]} on the Bus"
            assert on_bus[key] == e.type, f"{label}: {e.name} is {on_bus[key]} on the Bus"
        declared = {(_COUNTERPART.get(e.kind), e.name) for e in core.spec.endpoints}
        for (kind, name), _t in on_bus.items():
            if (node, kind, name) in _INTERNAL:
                continue
            assert (kind, name) in declared, f"{label}: Bus {kind} {name} is not in the spec"


def test_no_node_both_publishes_and_subscribes_a_bridged_topic(cfg):
    specs = [c.spec for c in _cores(cfg).values()] + [graph.arm_node(), graph.camera_node("c"),
                                                     graph.planner_node(["c"], ["wait"])]
    for s in specs:
        pubs = {e.name for e in s.of("publisher") if e.bridged}
        subs = {e.name for e in s.of("subscription") if e.bridged}
        assert not pubs & subs, f"{s.name} would loop its own messages back: {pubs & subs}"


def test_arm_core_endpoints(cfg):
    core = components.build_arm_core(FakeClock())
    on_bus = {(e.kind, e.name): e.type for e in core.bus.endpoints}
    for e in core.spec.endpoints:
        assert on_bus[(_COUNTERPART[e.kind], e.name)] == e.type
    assert core.spec.lifecycle


def test_camera_core_endpoints(tmp_path):
    class Cap:
        def isOpened(self):  # noqa: N802
            return True

        def read(self):
            import numpy as np
            return True, np.zeros((4, 6, 3), np.uint8)

        def set(self, *a):
            return True

        def get(self, *a):
            return 0.0

        def release(self):
            pass

    core = components.build_camera_core(FakeClock(), "overhead", 0,
                                        capture_factory=lambda s, b: Cap())
    on_bus = {(e.kind, e.name): e.type for e in core.bus.endpoints}
    assert on_bus == {(e.kind, e.name): e.type for e in core.spec.endpoints}


def test_embedded_run_uses_the_graph_names(monkeypatch):
    """Everything on one Bus (the embedded default) vs the union of the node specs: the same
    topic, service and action names with the same types; and every service the components
    call and every action they send goals to is a declared client of the graph."""
    from solarian_agent.system import build_sim_system

    called: set[str] = set()
    goals: set[str] = set()
    real_call, real_goal = Bus.call, Bus.send_goal

    def spy_call(self, name, request, timeout_s=5.0):
        called.add(name)
        return real_call(self, name, request, timeout_s)

    def spy_goal(self, name, goal, feedback_cb=None, done_cb=None):
        goals.add(name)
        return real_goal(self, name, goal, feedback_cb, done_cb)

    monkeypatch.setattr(Bus, "call", spy_call)
    monkeypatch.setattr(Bus, "send_goal", spy_goal)
    sysm = build_sim_system(seed=1)
    sysm.planner.message("put the red cup on the tray")
    sysm.run_until(lambda: bool(goals), 30.0)
    sysm.planner.cancel()
    sysm.runtime.run_for(0.5)
    sysm.shutdown()

    cams = list(sysm.config.cameras)
    tools = list(sysm.executor.tools)
    specs = [graph.sim_node(graph.DEFAULT_SIM_CAMERAS), graph.skills_node(tools, cams),
             graph.monitor_node(cams), graph.planner_node(cams, tools), graph.chat_node()]
    declared: dict[tuple[str, str], str] = {}
    for s in specs:
        for e in s.endpoints:
            declared[(_COUNTERPART.get(e.kind, e.kind), e.name)] = e.type
    for e in sysm.bus.endpoints:
        if e.kind == "subscription" and e.name == names.AGENT_STATE:
            continue  # markers are computed in the planner node
        key = (e.kind, e.name)
        assert key in declared, f"embedded {e.kind} {e.name} ({e.node}) is not in the graph"
        assert declared[key] == e.type
    clients = {e.name for s in specs for e in s.of("client")}
    action_clients = {e.name for s in specs for e in s.of("action_client")}
    assert called, "the run called no service"
    assert called <= clients, called - clients
    assert goals and goals <= action_clients, goals - action_clients
    assert {names.TOOL_CATALOGUE, names.EXECUTOR_ADVANCE} <= called


def test_graph_names_are_core_names():
    core_names = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)
                  and not k.startswith("T_")}
    extra = {graph.SET_TORQUE}
    cams = ["overhead", "wrist"]
    specs = [graph.sim_node(cams), graph.skills_node(["home"], cams), graph.monitor_node(cams),
             graph.planner_node(cams, ["home"]), graph.chat_node(), graph.arm_node(),
             graph.camera_node("overhead")]
    for s in specs:
        for e in s.endpoints:
            ok = (e.name in core_names or e.name in extra
                  or e.name in {names.image_topic(c) for c in cams}
                  or e.name in {names.camera_info_topic(c) for c in cams}
                  or e.name == names.skill_action("home"))
            assert ok, f"{s.name}: {e.name} is not a name from core.names"


# ------------------------------------------------------------------------------------------
# build files
# ------------------------------------------------------------------------------------------
def test_cmake_generates_every_interface_and_installs_every_node():
    text = (ROOT / "CMakeLists.txt").read_text()
    block = re.search(r"rosidl_generate_interfaces\(\$\{PROJECT_NAME\}(.*?)\)", text, re.S)
    assert block, "CMakeLists.txt must call rosidl_generate_interfaces(${PROJECT_NAME} ...)"
    listed = set(re.findall(r'"((?:msg|srv|action)/\w+\.(?:msg|srv|action))"', block.group(1)))
    files = {str(p.relative_to(ROOT)) for p in interface_files(ROOT)}
    assert listed == files
    assert "ament_python_install_package" not in text.split("#")[0] or \
        "ament_python_install_package(" not in re.sub(r"#.*", "", text)
    assert re.search(r"install\(DIRECTORY solarian_agent/\s+DESTINATION "
                     r"\$\{PYTHON_INSTALL_DIR\}/solarian_agent", text)
    for exe in graph.EXECUTABLES:
        assert (ROOT / "solarian_agent" / "ros" / f"{exe}.py").is_file(), exe
        assert re.search(rf"\b{exe}\b", text), f"CMakeLists.txt does not install {exe}"
    for d in ("launch", "config", "urdf"):
        assert re.search(rf"install\(DIRECTORY[^)]*\b{d}\b[^)]*share", text, re.S), d


def test_package_xml_is_ament_cmake_with_the_dependencies():
    text = (ROOT / "package.xml").read_text()
    assert "<build_type>ament_cmake</build_type>" in text
    assert "<member_of_group>rosidl_interface_packages</member_of_group>" in text
    for dep in ("rosidl_default_generators", "rclpy", "sensor_msgs", "std_msgs",
                "builtin_interfaces", "diagnostic_msgs", "visualization_msgs", "std_srvs",
                "action_msgs", "robot_state_publisher", "launch_ros", "rosbag2_storage_mcap",
                "ament_cmake_pytest"):
        assert f">{dep}<" in text, dep
    # the node graph runs on what PyPI serves: no runtime dependency on rosidl_runtime_py
    assert ">rosidl_runtime_py<" not in text


NOT_ON_PYPI = ("rosidl_runtime_py", "ros2cli", "rosbag2_py", "tf2_ros", "cv_bridge",
               "launch_testing")


def test_the_runtime_imports_nothing_pypi_does_not_serve():
    """Only launch_plan.launch_description (what the launch files call under a full ROS
    installation) imports launch / launch_ros; nothing imports the rest."""
    bad = []
    for path in (ROOT / "solarian_agent").rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r"\s*(?:from|import)\s+([\w.]+)", line)
            if not m:
                continue
            root = m.group(1).split(".")[0]
            if root in NOT_ON_PYPI or (root in ("launch", "launch_ros")
                                       and path.name != "launch_plan.py"):
                bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, bad


def test_launch_arguments_are_documented():
    doc = (ROOT / "docs" / "ros.md").read_text()
    for kind, args in launch_plan.LAUNCH_ARGS.items():
        assert f"{kind}.launch.py" in doc
        for a in args:
            assert f"`{a.name}`" in doc, f"docs/ros.md does not document {kind}: {a.name}"
    for exe in graph.EXECUTABLES:
        assert exe in doc


def test_rviz_config_shows_what_the_graph_publishes():
    text = (ROOT / "config" / "agent.rviz").read_text()
    for topic in ("/overhead/image_raw", "/wrist/image_raw", "/agent/view", "/agent/markers"):
        assert topic in text, topic
    assert "rviz_default_plugins/RobotModel" in text and "rviz_default_plugins/TF" in text
    # camera images are best effort in the graph: rviz must ask for best effort
    for m in re.finditer(r"Value: /(\w+)/image_raw", text):
        seg = text[max(0, m.start() - 400):m.start()]
        assert "Best Effort" in seg, m.group(0)
