"""The bridge's calling side of an action (the planner node): a Bus action server whose goals
are sent to the graph's action server with ``send_goal_async``.

:class:`ActionCaller` takes the core's goals for one action; each becomes a :class:`SentGoal`
that maps the ROS goal's feedback, result and cancels onto the core's GoalHandle.  Nothing here
waits on a ROS future: the goal response and the result arrive as callbacks on the executor
thread.  :class:`SentGoals` holds the goals in flight and runs the watchdog that bounds their
waits: rclpy's action client can lose the goal response or the result when the executor takes
it before the request is registered (ros2/rclpy#1123), so a goal whose response does not come
within the timeout ends ``refused`` (and is cancelled should the response still come), and a
goal the server reports ended (status topic) whose result does not arrive is asked again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import TransportError
from ..core.messages import SkillResult
from ..core.transport import GoalHandle
from ..rosmsg import convert as cv

# action_msgs/msg/GoalStatus
STATUS_SUCCEEDED = 4
STATUS_CANCELED = 5
TERMINAL = (4, 5, 6)  # SUCCEEDED, CANCELED, ABORTED

Warn = Callable[[str, str], None]  # (key, text): a rate-limited warning
Guard = Callable[[str, Callable[..., Any]], Callable[..., Any]]  # a callback that never raises


def finish(h: GoalHandle, how: str, result: Any) -> None:
    """End the core's goal ``how`` (succeed, canceled, abort) unless it already ended."""
    try:
        getattr(h, how)(result)
    except TransportError:
        pass  # already ended (a race with a refusal or a cancel)


class SentGoals:
    """The goals this node sent, by the core's goal id, and their watchdog (started with the
    first goal; it ends when ``closing`` is set)."""

    def __init__(self, closing: threading.Event, warn: Warn) -> None:
        self.closing = closing
        self.warn = warn
        # guards ``goals`` and each goal's response/cancel state (the executor thread, the
        # planner's loop thread and the watchdog all touch them)
        self.lock = threading.Lock()
        self.goals: dict[str, SentGoal] = {}
        self._watchdog: threading.Thread | None = None

    def add(self, goal_id: str, goal: SentGoal) -> None:
        with self.lock:
            self.goals[goal_id] = goal
        self._start_watchdog()

    def forget(self, goal_id: str) -> None:
        with self.lock:
            self.goals.pop(goal_id, None)

    def _start_watchdog(self) -> None:
        with self.lock:
            if self._watchdog is not None:
                return
            self._watchdog = threading.Thread(target=self._watch, name="bridge-goal-watchdog",
                                              daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        while not self.closing.wait(0.25):
            now = time.monotonic()
            with self.lock:
                goals = list(self.goals.values())
            for goal in goals:
                try:
                    goal.check(now)
                except Exception as ex:
                    self.warn("watchdog", f"goal watchdog: {type(ex).__name__}: {ex}")


class SentGoal:
    """One core goal ``h`` sent to the action server ``name``: ``ros`` is the ROS goal handle
    once the server answered; ``cancel`` a cancel asked before that; ``abandoned`` the
    watchdog gave up waiting for the answer."""

    def __init__(self, h: GoalHandle, name: str, goals: SentGoals, guard: Guard, warn: Warn,
                 timeout_s: Callable[[], float]) -> None:
        self.h = h
        self.name = name
        self.action_id = str(getattr(h.goal, "action_id", ""))
        self.goals = goals
        self.guard = guard
        self.warn = warn
        self.timeout_s = timeout_s
        self.ros: Any = None
        self.cancel = False
        self.abandoned = False
        self.sent = time.monotonic()
        self.asked = 0.0
        self.ended: float | None = None

    def forget(self) -> None:
        self.goals.forget(self.h.goal_id)

    def on_feedback(self, fb: Any) -> None:
        try:
            f = cv.from_ros(cv.T_FEEDBACK, fb.feedback)
        except cv.ConvertError:
            return
        self.h.execute()
        self.h.publish_feedback(f)

    def on_response(self, fut: Any) -> None:
        try:
            gh = fut.result()
        except Exception as ex:
            gh, why = None, f"refused: {self.name}: {type(ex).__name__}: {ex}"
        else:
            why = f"refused: {self.name} rejected the goal"
        if gh is None or not gh.accepted:
            self.forget()
            finish(self.h, "abort", SkillResult(self.action_id, "refused", why))
            return
        with self.goals.lock:  # paired with the cancel and the watchdog
            abandoned = self.abandoned
            self.ros = gh
            cancel = self.cancel
        if abandoned:  # answered after the watchdog gave it up: it must not run on
            self.warn(self.name, f"{self.name}: late goal response for {self.action_id}; "
                                 "cancelling the goal")
            gh.cancel_goal_async()
            return
        if cancel:
            gh.cancel_goal_async()
        self.ask_result(gh)

    def ask_result(self, gh: Any) -> None:
        self.asked = time.monotonic()
        gh.get_result_async().add_done_callback(self.guard(f"result {self.name}",
                                                           self.on_result))

    def on_result(self, fut: Any) -> None:
        self.forget()
        try:
            res = fut.result()
        except Exception as ex:  # the result request failed: the goal still ends
            res, why = None, f"{type(ex).__name__}: {ex}"
        else:
            why = "no result"
        if res is None:
            finish(self.h, "abort", SkillResult(self.action_id, "failed", why))
            return
        try:
            r = cv.from_ros(cv.T_RESULT, res.result)
        except cv.ConvertError as ex:
            r = SkillResult(self.action_id, "failed", str(ex))
        self.h.execute()
        if res.status == STATUS_SUCCEEDED:
            finish(self.h, "succeed", r)
        elif res.status == STATUS_CANCELED:
            finish(self.h, "canceled", r)
        else:
            finish(self.h, "abort", r)

    def check(self, now: float) -> None:
        """The watchdog's look at this goal (every 0.25 s, on its thread)."""
        with self.goals.lock:
            gh = self.ros
            late = gh is None and now - self.sent > self.timeout_s()
            if late:
                self.abandoned = True
        if late:  # the goal response never came (rclpy/#1123, or a dead server)
            self.forget()
            finish(self.h, "abort", SkillResult(
                self.action_id, "refused", f"refused: {self.name} did not answer the goal "
                                           f"within {self.timeout_s():g} s"))
            return
        if gh is None:
            return
        if int(getattr(gh, "status", 0)) in TERMINAL:
            # ended (status topic) but no result yet: the result response may be lost
            # (rclpy/#1123); asking again is allowed and answered from the server's cache
            if self.ended is None:
                self.ended = now
            if now - self.ended > 2.0 and now - self.asked > 2.0:
                self.ask_result(gh)


class ActionCaller:
    """The core's goals for the action ``name``, sent through the rclpy action ``client``
    (``on_goal`` and ``on_cancel`` are the Bus action server's handlers).  ``timeout_s``: how
    long a goal's response may take, read when it is checked (the bridge's setting)."""

    def __init__(self, client: Any, name: str, codec: cv.Codec, goals: SentGoals,
                 guard: Guard, warn: Warn, closing: threading.Event,
                 timeout_s: Callable[[], float]) -> None:
        self.client = client
        self.name = name
        self.codec = codec
        self.goals = goals
        self.guard = guard
        self.warn = warn
        self.closing = closing
        self.timeout_s = timeout_s

    def on_goal(self, h: GoalHandle) -> str | None:
        # runs on the planner's loop thread: sends and returns, never waits on the future
        if self.closing.is_set():
            return "refused: node shutting down"
        if not self.client.server_is_ready():
            return (f"refused: no action server for {self.name} in the graph (is the skills "
                    "node running?)")
        goal = SentGoal(h, self.name, self.goals, self.guard, self.warn, self.timeout_s)
        try:
            goal_msg = cv.to_ros(self.codec, cv.T_GOAL, h.goal)
        except cv.ConvertError as ex:
            return f"refused: {ex}"
        self.goals.add(h.goal_id, goal)
        self.client.send_goal_async(
            goal_msg, feedback_callback=self.guard(f"feedback {self.name}", goal.on_feedback)
        ).add_done_callback(self.guard(f"goal response {self.name}", goal.on_response))
        return None

    def on_cancel(self, h: GoalHandle) -> bool:
        with self.goals.lock:
            goal = self.goals.goals.get(h.goal_id)
            if goal is None:
                return False
            gh = goal.ros
            if gh is None:
                goal.cancel = True  # sent as soon as the server has answered
        if gh is None:
            return True
        if not self.client.server_is_ready():
            # the server is gone: no result will ever come, so the goal ends here
            self.goals.forget(h.goal_id)
            finish(h, "abort", SkillResult(str(getattr(h.goal, "action_id", "")),
                                           "stopped", f"cancelled; the action server "
                                           f"{self.name} is gone"))
            return True
        gh.cancel_goal_async()  # the result (CANCELED, or how it ended) follows
        return True


__all__ = ["STATUS_CANCELED", "STATUS_SUCCEEDED", "TERMINAL", "ActionCaller", "SentGoal",
           "SentGoals", "finish"]
