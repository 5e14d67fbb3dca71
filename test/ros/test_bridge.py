"""The bridge between two nodes' private buses, on real rclpy (in one process, one context):
a skills node (toy tools, its control loop on a thread) and a planner-side bus with the
planner's client endpoints.  Goals, feedback, cancels, refusals, services, the latched
generation and shutdown cross real rclpy action servers, clients and topics.

What real rclpy cannot be made to do on demand (apply an accepted cancel late, lose or delay an
action response, lose a server between two calls) stays in test_bridge_fake.py, over the
stand-in."""

from __future__ import annotations

import threading
import time

import pytest
from _rostest_util import free_domain, prepare_environment, wait_until

from solarian_agent.core import names
from solarian_agent.core.clock import SystemClock
from solarian_agent.core.errors import ServiceUnavailableError
from solarian_agent.core.messages import Generation, SkillGoal
from solarian_agent.core.transport import Bus, GoalStatus
from solarian_agent.ros import components
from solarian_agent.rosmsg import graph

pytestmark = pytest.mark.usefixtures("real_ros")


class _Log:
    """Stands in for a node's logger, to read what the bridge reported."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _add(self, text: str, *_a: object, **_k: object) -> None:
        self.lines.append(str(text))

    info = warning = error = debug = warn = _add


class Graph:
    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        from solarian_agent.ros.bridge import Bridge

        prepare_environment()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=free_domain())
        cfg = components.load_config(overrides={"cameras": ["overhead"]})
        self.skills = components.build_skills_core(SystemClock(), cfg, tools="toy")
        self.skills_node = Node("skills", context=self.context)
        self.sb = Bridge(self.skills_node, self.skills.bus, goal_poll_s=0.002)
        self.sb.add(self.skills.spec.endpoints)
        self.bus = Bus()
        self.planner_node = Node("planner", context=self.context)
        self.pb = Bridge(self.planner_node, self.bus, service_timeout_s=3.0)
        self.pb.log = _Log()
        spec = graph.planner_node(["overhead"], list(self.skills.parts["executor"].tools))
        self.pb.add([e for e in spec.endpoints if e.kind in ("client", "action_client")
                     or e.name == names.EXECUTOR_GENERATION])
        self.gen = self.bus.subscribe(names.EXECUTOR_GENERATION, names.T_GENERATION)
        self.executor = SingleThreadedExecutor(context=self.context)  # as the nodes spin
        self.executor.add_node(self.skills_node)
        self.executor.add_node(self.planner_node)
        self.spin = threading.Thread(target=self._spin, daemon=True)
        self.spin.start()
        self.stop = threading.Event()
        self.ticks = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        missing = self.pb.wait_for_action_servers(30.0, threading.Event())
        assert not missing, f"the action servers were not discovered: {missing}"
        assert set(self.pb.action_clients) == {names.skill_action(t) for t in
                                               self.skills.parts["executor"].tools}

    def _spin(self) -> None:
        self.sb.executor_thread = self.pb.executor_thread = threading.get_ident()
        self.executor.spin()

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.skills.loops[0].fn()
            self.ticks += 1
            self.stop.wait(0.02)

    def stop_loop(self) -> None:
        self.stop.set()
        self.thread.join(2)

    def close(self) -> None:
        self.stop_loop()
        self.sb.close()
        self.pb.close()
        self.skills.shutdown()
        self.sb.wait_for_goals(2.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.spin.join(5.0)
        for n in (self.skills_node, self.planner_node):
            n.destroy_node()
        self.context.try_shutdown()

    def goal(self, tool, params, gen, aid):
        return self.bus.send_goal(names.skill_action(tool), SkillGoal(tool, params, gen, aid))


@pytest.fixture
def g(real_ros):
    graph_ = Graph()
    try:
        yield graph_
    finally:
        graph_.close()


def test_catalogue_and_latched_generation_cross_the_graph(g):
    specs = g.bus.call(names.TOOL_CATALOGUE, {})
    assert {"wait", "spin", "point_at"} <= {d["name"] for d in specs}
    assert wait_until(lambda: isinstance(g.gen.latest(), Generation), 10.0)
    assert g.gen.latest().value == 1


def test_goal_succeeds_with_feedback(g):
    h = g.goal("wait", {"seconds": 0.1}, 1, "a1")
    assert h.wait(10.0)
    assert h.status == GoalStatus.SUCCEEDED and h.result.outcome == "succeeded"
    assert h.feedback is not None and h.feedback.action_id == "a1"


def test_stale_generation_and_bad_arguments_are_refused_with_the_reason(g):
    assert g.bus.call(names.EXECUTOR_ADVANCE, {"reason": "test", "by": "test"}) == 2
    h = g.goal("wait", {"seconds": 0.1}, 1, "a2")
    assert h.wait(10.0)
    assert h.status == GoalStatus.ABORTED
    assert h.result.outcome == "refused" and "stale generation 1" in h.result.reason
    assert wait_until(lambda: g.gen.latest() is not None and g.gen.latest().value == 2, 10.0)
    bad = g.goal("wait", {"seconds": "x"}, 2, "a3")
    assert bad.wait(10.0) and "invalid arguments" in bad.result.reason


def test_cancel_stops_the_skill_at_the_next_tick(g):
    h = g.goal("spin", {}, 1, "a4")
    assert wait_until(lambda: h.status == GoalStatus.EXECUTING, 10.0)
    assert h.cancel()
    assert h.wait(10.0)
    assert h.status == GoalStatus.CANCELED
    assert h.result.outcome == "stopped" and h.result.reason == "cancel requested"


def test_cancel_before_the_server_answered(g):
    h = g.goal("spin", {}, 1, "a5")
    assert h.cancel()  # the ROS goal handle may not exist yet: cancelled on arrival
    assert h.wait(10.0) and h.result.outcome == "stopped"


def test_generation_advance_stops_a_running_goal_as_aborted_not_cancelled(g):
    h = g.goal("spin", {}, 1, "a6")
    assert wait_until(lambda: h.status == GoalStatus.EXECUTING, 10.0)
    g.bus.call(names.EXECUTOR_ADVANCE, {"reason": "operator takeover", "by": "operator"})
    assert h.wait(10.0)
    # no ROS cancel was requested, so the action ends ABORTED, carrying outcome stopped
    assert h.status == GoalStatus.ABORTED and h.result.outcome == "stopped"
    assert "operator takeover" in h.result.reason


def test_shutdown_aborts_running_goals_with_a_result(g):
    h = g.goal("spin", {}, 1, "a8")
    assert wait_until(lambda: h.status == GoalStatus.EXECUTING, 10.0)
    g.stop_loop()  # the node's shutdown order: loops, bridge, core
    g.sb.close()
    g.skills.shutdown()
    assert h.wait(10.0)
    assert h.status == GoalStatus.ABORTED
    assert h.result.outcome == "stopped" and "node shutting down" in h.result.reason
    assert wait_until(lambda: g.sb.running_goals == 0, 5.0)
    late = g.goal("wait", {"seconds": 0.1}, 2, "a9")
    assert late.wait(10.0) and late.result.outcome == "refused"


def test_a_raising_core_callback_never_reaches_the_executor(g):
    """rclpy's executor re-raises a callback's exception out of spin(): the
    bridge's callbacks log it instead (here: handing feedback to the planner raises), and the
    executor goes on serving."""
    h = g.goal("wait", {"seconds": 0.4}, 1, "c3")

    def bad(_f):
        raise RuntimeError("planner bug")

    h.publish_feedback = bad
    assert h.wait(10.0) and h.status == GoalStatus.SUCCEEDED
    assert any("planner bug" in line for line in g.pb.log.lines)
    assert g.spin.is_alive()
    again = g.goal("wait", {"seconds": 0.05}, 1, "c3b")
    assert again.wait(10.0) and again.status == GoalStatus.SUCCEEDED


def test_no_server_is_a_refusal_not_a_hang(real_ros):
    import rclpy
    from rclpy.node import Node

    from solarian_agent.ros.bridge import Bridge

    prepare_environment()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=free_domain())
    node = Node("lonely", context=ctx)
    try:
        bus = Bus()
        b = Bridge(node, bus, service_timeout_s=0.2)
        b.add(graph.planner_node([], ["wait"]).of("action_client")
              + graph.planner_node([], []).of("client"))
        t0 = time.monotonic()
        h = bus.send_goal(names.skill_action("wait"), SkillGoal("wait", {}, 1, "a7"))
        assert h.done and "no action server for skills/wait" in h.result.reason
        with pytest.raises(ServiceUnavailableError, match="skills/catalogue"):
            bus.call(names.TOOL_CATALOGUE, {})
        assert time.monotonic() - t0 < 30.0  # bounded, whatever the machine
        # the planner node's start-up wait is bounded and names what has no server
        t0 = time.monotonic()
        assert b.wait_for_action_servers(0.3, threading.Event()) == ["skills/wait"]
        assert 0.3 <= time.monotonic() - t0 < 10.0
        stopped = threading.Event()
        stopped.set()
        assert b.wait_for_action_servers(60.0, stopped) == ["skills/wait"]  # ends on stop
        b.close()
    finally:
        node.destroy_node()
        ctx.try_shutdown()


@pytest.fixture
def two_nodes(real_ros):
    """A serving node and a calling node on one single-threaded executor (as a node spins)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    prepare_environment()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=free_domain())
    server, client = Node("planner", context=ctx), Node("viewer", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(server)
    ex.add_node(client)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    try:
        yield server, client
    finally:
        ex.shutdown(timeout_sec=2.0)
        spin.join(5.0)
        server.destroy_node()
        client.destroy_node()
        ctx.try_shutdown()


def test_service_errors_come_back_as_replies(two_nodes):
    server, client = two_nodes
    bus = Bus()
    bus.create_service(names.AGENT_MESSAGE, names.T_AGENT_COMMAND, lambda req: 1 / 0)
    _, other = _serve(server, client, bus, (names.AGENT_MESSAGE,))
    r = other.call(names.AGENT_MESSAGE, {"text": "hi"})
    assert r["ok"] is False and "ZeroDivisionError" in r["reason"]


def _serve(server, client, bus, names_):
    """Serve ``bus``'s handlers of the planner's services ``names_`` on ``server``; call them
    through ``client``'s bridge.  The calling side's bus."""
    from solarian_agent.ros.bridge import Bridge

    eps = [e for e in graph.planner_node([], []).endpoints if e.name in names_]
    Bridge(server, bus).add(eps)
    other = Bus()
    Bridge(client, other, service_timeout_s=10.0).add(
        [graph.Endpoint("client", e.name, e.type) for e in eps])
    return bus, other


def _slow_observer(release: threading.Event, wait_s: float, description: str = "") -> Bus:
    """A Bus serving observe_scene that answers once ``release`` is set (a vision model
    thinking), at most ``wait_s`` later."""
    bus = Bus()

    def observe(req):
        release.wait(wait_s)
        return {"ok": True, "description": description, "focus": req.get("focus", "")}

    bus.create_service(names.OBSERVE_SCENE, names.T_OBSERVE_SCENE, observe)
    return bus


def test_a_slow_service_does_not_hold_the_nodes_other_callbacks(two_nodes):
    """observe_scene may wait on a vision model for seconds: it is answered off the executor
    thread, so a goal response or a topic of the same node is not held up meanwhile."""
    server, client = two_nodes
    release = threading.Event()
    try:
        bus = _slow_observer(release, 10.0, "a red cup")
        bus.create_service(names.AGENT_MESSAGE, names.T_AGENT_COMMAND,
                           lambda req: {"ok": True, "reason": ""})
        _, other = _serve(server, client, bus, (names.OBSERVE_SCENE, names.AGENT_MESSAGE))
        slow: dict = {}
        t = threading.Thread(target=lambda: slow.update(
            other.call(names.OBSERVE_SCENE, {"focus": "the cup"})))
        t.start()
        time.sleep(0.5)  # the slow call is in the server's hands now
        assert other.call(names.AGENT_MESSAGE, {"text": "hi"})["ok"]  # answered meanwhile
        assert not slow
        release.set()
        t.join(10.0)
        assert slow.get("ok") and slow.get("description") == "a red cup"
    finally:
        release.set()


def test_text_with_lone_surrogates_crosses_the_graph(two_nodes):
    """A model's lone surrogate (its JSON's "\\ud83d") in the agent's state and events never
    makes a publish fail to encode: it arrives as U+FFFD, the rest of the text intact."""
    from solarian_agent.core.messages import AgentEvent, AgentState
    from solarian_agent.core.transport import LATCHED, QoS
    from solarian_agent.ros.bridge import Bridge
    from solarian_agent.rosmsg.graph import Endpoint

    planner_side, viewer_side = two_nodes
    bus_a, bus_b = Bus(), Bus()
    a, b = Bridge(planner_side, bus_a), Bridge(viewer_side, bus_b)
    try:
        a.log = _Log()
        events_qos = QoS(depth=50)
        a.add([Endpoint("publisher", names.AGENT_STATE, names.T_AGENT_STATE, LATCHED),
               Endpoint("publisher", names.AGENT_EVENTS, names.T_AGENT_EVENT, events_qos)])
        b.add([Endpoint("subscription", names.AGENT_STATE, names.T_AGENT_STATE, LATCHED),
               Endpoint("subscription", names.AGENT_EVENTS, names.T_AGENT_EVENT, events_qos)])
        got_state = bus_b.subscribe(names.AGENT_STATE, names.T_AGENT_STATE, qos=LATCHED)
        events: list[AgentEvent] = []
        bus_b.subscribe(names.AGENT_EVENTS, names.T_AGENT_EVENT, events.append)
        lone = "\ud83d"
        state = bus_a.publisher(names.AGENT_STATE, names.T_AGENT_STATE, LATCHED)
        evp = bus_a.publisher(names.AGENT_EVENTS, names.T_AGENT_EVENT, events_qos)

        def arrived() -> bool:
            state.publish(AgentState(2, "running", "pick " + lone, (
                {"step": 1, "description": "d" + lone, "status": "pending"},), (),
                ({"role": "agent", "text": "on it " + lone},)))
            evp.publish(AgentEvent("2026-01-01T00:00:00Z", "planner_turn",
                                   {"text": lone, "tools": ["x" + lone]}))
            return got_state.latest() is not None and bool(events)

        assert wait_until(arrived, 20.0), a.log.lines
        st = got_state.latest()
        assert st.task == "pick \ufffd" and st.conversation[0]["text"] == "on it \ufffd"
        assert st.plan[0]["description"] == "d\ufffd"
        assert events[-1].data == {"text": "\ufffd", "tools": ["x\ufffd"]}
        assert not [line for line in a.log.lines if "not publishing" in line], a.log.lines
    finally:
        a.close()
        b.close()


def test_a_service_call_waits_no_longer_than_its_caller_asked(two_nodes):
    """The bridge's client waits at most the caller's timeout, the wait for the server
    included: a 0.5 s request on a node whose service_timeout_s is 10 s ends after 0.5 s (it
    waited 10 s before), and one to a service with no server ends within its 0.3 s."""
    from solarian_agent.core.errors import ServiceTimeoutError

    server, client = two_nodes
    release = threading.Event()
    try:
        bus = _slow_observer(release, 20.0)
        _, other = _serve(server, client, bus, (names.OBSERVE_SCENE,))
        release.set()  # first: the server answers (it is up and matched)
        assert other.call(names.OBSERVE_SCENE, {"focus": ""}, timeout_s=30.0)["ok"]
        release.clear()
        t0 = time.monotonic()
        with pytest.raises(ServiceTimeoutError, match="within 0.5 s"):
            other.call(names.OBSERVE_SCENE, {"focus": "the cup"}, timeout_s=0.5)
        took = time.monotonic() - t0
        assert 0.5 <= took < 2.0, took
        from solarian_agent.ros.bridge import Bridge

        lone = Bus()
        Bridge(client, lone, service_timeout_s=10.0).add(
            [graph.Endpoint("client", names.AGENT_RESET, names.T_AGENT_COMMAND)])
        t0 = time.monotonic()
        with pytest.raises(ServiceUnavailableError):
            lone.call(names.AGENT_RESET, {"text": "", "by": "test"}, timeout_s=0.3)
        took = time.monotonic() - t0
        assert 0.3 <= took < 0.9, took  # it waited 1 s for the server before
    finally:
        release.set()
