"""What the planner does when a node of the graph dies or comes back (:mod:`.liveness`).

Rules:

* **skills lost**: its goals in flight will never end by themselves (the action server died
  with them, and so did their time limits), so each is ended here as ``failed`` with the
  reason ``lost: ...``; the run is told and the planner woken, so the model decides (wait,
  retry when it is back, or end the run honestly);
* **monitor lost**: the running actions that only the monitor (or their time limit) ends
  (``ends_by_itself`` false: policy skills) are stopped with the reason; the run is told;
* **a node back**: (the skills node restarted: a generation claimed from its new executor)
  the run is told and the planner woken: it continues or retries at once,
  never waiting for a result that will not come, and operator messages queued meanwhile are
  delivered with that call;
* **skills lost, the model told**: no further model call until it is back (every tool needs
  it); messages queued meanwhile go with the call made when it is back;
* **a needed node lost for ``node_wait_s``** (the skills node, whose tools every run needs):
  the run fails naming the node, instead of waiting for the run budget.
"""

from __future__ import annotations

from typing import Any

from .clock import Clock
from .errors import TransportError
from .liveness import NodeChange, NodeChanged, NodeState, NodeWatch
from .messages import SkillResult
from .planner_state import RunState, Wakes
from .statuses import Outcome, RunStatus

SKILLS = "skills"
MONITOR = "monitor"
DEFAULT_NODE_WAIT_S = 60.0


class NodeReactions:
    """Called from the planner's tick: turns :class:`NodeWatch` changes into the planner's
    actions (see the module's rules)."""

    def __init__(self, clock: Clock, watch: NodeWatch, run: RunState, book: Any, goals: Any,
                 catalogue: Any, wakes: Wakes, journal: Any, runs: Any, state: Any,
                 node_wait_s: float = DEFAULT_NODE_WAIT_S) -> None:
        self.clock = clock
        self.watch = watch
        self._run = run
        self._book = book
        self._goals = goals
        self._catalogue = catalogue
        self._wakes = wakes
        self._journal = journal
        self._runs = runs
        self._state = state
        self.node_wait_s = node_wait_s
        self.changes: list[tuple[float, NodeChange]] = []  # what was seen, for tests and logs
        self._lost_since: dict[str, float] = {}
        self._calls_while_lost = 0
        self._watched = 0  # how many nodes the published state lists

    def hold_call(self) -> bool:
        """Whether the next model call waits: the skills node is lost and the model was
        already told (one call after the loss); it goes on when the node is back, or the run
        fails after ``node_wait_s``.  Messages that arrive meanwhile wait with it."""
        return SKILLS in self._lost_since and self._calls_while_lost >= 1

    def call_started(self) -> None:
        if SKILLS in self._lost_since:
            self._calls_while_lost += 1

    def tick(self) -> None:
        now = self.clock.now()
        changes = self.watch.tick()
        for ch in changes:
            self.changes.append((now, ch))
            self._journal.event(NodeChanged(node=ch.node, state=ch.state.value,
                                            silent_s=round(ch.silent_s, 2),
                                            restarted=ch.restarted))
            if ch.state == NodeState.LOST:
                self._lost_since[ch.node] = now
                self._calls_while_lost = 0
                self._on_lost(ch)
            else:
                self._lost_since.pop(ch.node, None)
                if ch.node == SKILLS and ch.restarted:
                    # a new executor counts its generations from the start again: claim one
                    # from it, or every goal would be refused as ahead of it
                    self._runs.advance_generation("the skills node restarted", "agent")
                self._tell(ch.describe() + " Continue the task: retry what it lost if needed.")
        watched = self.watch.watched()
        if changes or watched != self._watched:  # a node that joined is shown up at once
            self._watched = watched
            self._state.publish()
        since = self._lost_since.get(SKILLS)
        if since is not None and self._run.active and now - since > self.node_wait_s:
            self._lost_since.pop(SKILLS)
            self._runs.end_run(RunStatus.FAILED, f"the {SKILLS} node has been gone for "
                                                 f"{now - since:.0f} s (node_wait_s "
                                                 f"{self.node_wait_s:g}): no skill can run")

    def _on_lost(self, ch: NodeChange) -> None:
        if ch.node == SKILLS:
            reason = (f"lost: the skills node is gone (no heartbeat for {ch.silent_s:.1f} s); "
                      "the arm stopped when its commands did")
            for info in list(self._book.running.values()):
                try:
                    info.handle.abort(SkillResult(info.action_id, Outcome.FAILED, reason))
                except TransportError:
                    pass  # it ended meanwhile
            self._tell(ch.describe() + " Its actions in flight are lost; it may come back.")
        elif ch.node == MONITOR:
            reason = ("stopped: the monitor node is gone, and nothing else would end this "
                      "action before its time limit")
            for aid, info in list(self._book.running.items()):
                spec = self._catalogue.specs.get(info.tool)
                if spec is not None and not getattr(spec, "ends_by_itself", True):
                    self._goals.stop(aid, info, reason, "harness")
            self._tell(ch.describe() + " Actions only the monitor ends were stopped.")
        else:
            self._tell(ch.describe())

    def _tell(self, text: str) -> None:
        if not self._run.active:
            return
        self._wakes.news.append(text)
        if self._run.status == RunStatus.RUNNING:
            self._wakes.wake("node", hold=True)


__all__ = ["DEFAULT_NODE_WAIT_S", "MONITOR", "SKILLS", "NodeReactions"]
