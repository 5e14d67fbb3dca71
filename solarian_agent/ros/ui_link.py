"""The operator's front ends (panel, terminal chat) on a running ROS 2 graph.

:class:`RosLink` is the :class:`~solarian_agent.ui.link.AgentLink` the embedded run uses
(:class:`~solarian_agent.ui.link.BusLink`) over a private in-process Bus that a
:class:`~.bridge.Bridge` joins to the graph along :func:`.graph.panel_node` /
:func:`.graph.chat_node`: ``agent/state`` (transient local: the latest state at once),
``agent/events``, ``monitor/verdicts``, ``operator/events``, the camera topics and
``agent/view`` are bridged in; ``agent/message | cancel | reset`` and the arm's (or the
simulator's) ``estop`` / ``estop_reset`` are bridged service clients, called from the front
end's own threads (the panel's request workers, the chat's input loop), never from a ROS
callback; operator events (pause, takeover) are published straight to the graph.  So the panel
and the chat run unchanged: whatever they do over the embedded Bus they do over ROS.

The node spins one SingleThreadedExecutor on its own thread (:class:`.common.Spinner`); every
wait is bounded (``service_timeout_s``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import rclpy
from rclpy.node import Node

from ..core import names
from ..core.messages import OperatorEvent
from ..core.transport import Bus
from ..rosmsg import convert as cv
from ..rosmsg import graph
from ..ui.link import BusLink, Reply
from .bridge import Bridge, ros_qos
from .codec import rclpy_codec
from .common import RosClock, Spinner


class RosLink(BusLink):
    """An AgentLink on ``node``'s graph.  ``cameras``: camera names (``<cam>/image_raw``);
    ``()`` reads no images (the chat).  :meth:`close` stops the node's executor, destroys the
    node and shuts its context down."""

    def __init__(self, node: Node, cameras: Sequence[str], *, service_timeout_s: float = 3.0
                 ) -> None:
        self.ros_node = node
        self.clock = RosClock(node)
        self._stop = threading.Event()
        bus = Bus()
        self.bridge = Bridge(node, bus, service_timeout_s=service_timeout_s)
        spec = graph.panel_node(cameras) if cameras else graph.chat_node()
        self.bridge.add(spec.endpoints)
        self._codec = rclpy_codec()
        super().__init__(bus, list(cameras), service_timeout_s=service_timeout_s,
                         node=node.get_name(), clock=self.clock)
        # (after BusLink's __init__, which starts with no publisher of its own)
        self._operator_pub = node.create_publisher(
            self._codec.cls(names.T_OPERATOR_EVENT), names.OPERATOR_EVENTS,
            ros_qos(graph.OPERATOR_QOS))
        self.spinner = Spinner(node, self._stop, bridge=self.bridge).start()
        self._closed = False

    @property
    def failed(self) -> bool:
        """The executor stopped on an error (the link is deaf to the graph)."""
        return self.spinner.failed.is_set()

    def _has_service(self, name: str) -> bool:
        client = self.bridge.clients.get(name)
        try:
            return client is not None and bool(client.service_is_ready())
        except Exception:  # the node is shutting down
            return False

    def agent_available(self) -> bool:
        return self._has_service(names.AGENT_MESSAGE)

    def _trigger(self, service: str, request: Mapping[str, Any]) -> Reply:
        """An e-stop call waits (bounded) for its server to be discovered: a front end that
        just started, or a server that just restarted, is not yet "unavailable"."""
        client = self.bridge.clients.get(service)
        if client is not None and not self._has_service(service):
            try:
                client.wait_for_service(timeout_sec=min(2.0, self.service_timeout_s))
            except Exception:  # the node is shutting down: the call below says so
                pass
        return super()._trigger(service, request)

    def operator_event(self, kind: str, detail: Mapping[str, Any] | None = None) -> Reply:
        ev = OperatorEvent(kind, dict(detail or {}), self.clock.now())
        try:
            self._operator_pub.publish(cv.to_ros(self._codec, names.T_OPERATOR_EVENT, ev))
        except Exception as e:  # a closed node: say so, never raise into the front end
            return {"ok": False, "reason": f"operator event not sent: {type(e).__name__}: {e}"}
        return {"ok": True, "reason": ""}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        super().close()
        self.bridge.close()
        self._stop.set()
        self.spinner.close()


def open_node(name: str, *, namespace: str = "", domain: int | None = None,
              args: Sequence[str] | None = None) -> Node:
    """A node on a context of its own (no rclpy signal handlers: Ctrl-C stays Python's), with
    the Fast DDS profile the launcher gives the graph's nodes (unless one is set)."""
    from .processes import with_dds_profile
    from .ros_types import find_generated_interfaces

    find_generated_interfaces()
    with_dds_profile(os.environ)  # type: ignore[arg-type]  # before the DDS participant starts
    context = rclpy.Context()
    rclpy.init(args=list(args) if args is not None else None, context=context,
               domain_id=domain)
    try:
        return Node(name, namespace=namespace.strip("/") or None, context=context)
    except Exception:
        context.try_shutdown()
        raise


def make_ros_link(cameras: Sequence[str] | None = None, *, name: str = "chat",
                  namespace: str = "", domain: int | None = None,
                  config_file: str = "", service_timeout_s: float = 3.0) -> RosLink:
    """A :class:`RosLink` on its own node ``name`` (in ``namespace``, on ``domain`` or
    ``ROS_DOMAIN_ID``).  ``cameras`` None: the configuration's ``agent.cameras``
    (``config_file``, default config/controller.yaml), as the agent's nodes read them."""
    if cameras is None:
        from .components import load_config

        cameras = list(load_config(config_file).cameras)
    node = open_node(name, namespace=namespace, domain=domain)
    try:
        return RosLink(node, cameras, service_timeout_s=service_timeout_s)
    except Exception:
        node.destroy_node()
        node.context.try_shutdown()
        raise


__all__ = ["RosLink", "make_ros_link", "open_node"]
