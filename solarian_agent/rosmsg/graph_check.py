"""Checking a launched graph without ROS: every subscription fed, QoS compatible, one server each.

The graph contract test builds :class:`LaunchedNode` s from the launch files (spec, namespace,
remappings) and asks :func:`check_graph` for every problem as a sentence, so a launch file that
remaps a topic away from its publisher, or two nodes that serve the same action, fail before
anything is started.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..core.transport import QoS
from .graph import EXTERNAL_INPUTS, KINDS, OPTIONAL_INPUTS, Endpoint, NodeSpec, expand


def qos_problem(pub: QoS, sub: QoS) -> str:
    """'' when a publisher with ``pub`` matches a subscription with ``sub`` (ROS 2 rules)."""
    if pub.best_effort and not sub.best_effort:
        return "the publisher is best effort but the subscription wants reliable"
    if sub.transient_local and not pub.transient_local:
        return "the subscription wants transient local but the publisher is volatile"
    return ""


def resolve(name: str, namespace: str = "", remappings: Iterable[tuple[str, str]] = ()) -> str:
    full = expand(name, namespace)
    for src, dst in remappings:
        if expand(src, namespace) == full:
            return expand(dst, namespace)
    return full


@dataclass(frozen=True)
class LaunchedNode:
    """A node as a launch file starts it: its spec, namespace and remappings."""

    spec: NodeSpec
    name: str = ""
    namespace: str = ""
    remappings: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return expand(self.name or self.spec.name, self.namespace)

    def resolved(self) -> list[tuple[Endpoint, str]]:
        return [(e, resolve(e.name, self.namespace, self.remappings))
                for e in self.spec.endpoints]


def check_graph(nodes: Sequence[LaunchedNode], externals: Sequence[NodeSpec] = ()
                ) -> list[str]:
    """Every problem of a graph, as sentences ([] = consistent).

    ``externals`` are executables of the package not in this launch (the chat client): a
    subscription of an :data:`EXTERNAL_INPUTS` topic may be fed by one of them instead."""
    problems: list[str] = []
    by_kind: dict[str, dict[str, list[tuple[LaunchedNode, Endpoint]]]] = {
        k: {} for k in KINDS}
    for n in nodes:
        for e, full in n.resolved():
            by_kind[e.kind].setdefault(full, []).append((n, e))
    ext_pubs = {expand(e.name): e for s in externals for e in s.of("publisher")}

    pubs = by_kind["publisher"]
    for topic, ps in pubs.items():
        types = {e.type for _, e in ps}
        if len(types) > 1:
            problems.append(f"topic {topic}: publishers disagree on the type: {sorted(types)}")
    for topic, subs in by_kind["subscription"].items():
        for n, s in subs:
            ps = pubs.get(topic, [])
            if not ps:
                rel = topic.rsplit("/", 1)[-1]
                ext = next((k for k in EXTERNAL_INPUTS if topic.endswith("/" + k)), None)
                if ext is not None and expand(ext) in ext_pubs:
                    continue
                if any(topic.endswith("/" + k) for k in OPTIONAL_INPUTS):
                    continue
                problems.append(f"{n.label} subscribes {topic} ({s.type}) but nothing in the "
                                f"graph publishes it ({rel})")
                continue
            for pn, p in ps:
                if p.type != s.type:
                    problems.append(f"{n.label} subscribes {topic} as {s.type} but {pn.label} "
                                    f"publishes {p.type}")
                    continue
                assert p.qos is not None and s.qos is not None
                why = qos_problem(p.qos, s.qos)
                if why:
                    problems.append(f"{topic}: {pn.label} -> {n.label} do not match: {why}")
    for server_kind, client_kind, what in (("service", "client", "service"),
                                           ("action_server", "action_client", "action")):
        servers = by_kind[server_kind]
        for name, ss in servers.items():
            if len(ss) > 1:
                problems.append(f"{what} {name} has {len(ss)} servers: "
                                f"{', '.join(n.label for n, _ in ss)}")
        for name, cs in by_kind[client_kind].items():
            for n, c in cs:
                ss = servers.get(name, [])
                if not ss:
                    problems.append(f"{n.label} calls {what} {name} ({c.type}) but no node in "
                                    "the graph serves it")
                elif ss[0][1].type != c.type:
                    problems.append(f"{n.label} calls {what} {name} as {c.type} but "
                                    f"{ss[0][0].label} serves {ss[0][1].type}")
    return problems


__all__ = ["LaunchedNode", "check_graph", "qos_problem", "resolve"]
