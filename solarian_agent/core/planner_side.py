"""Parallel side answers: an independent quick question is answered in its own short model
session while the main task carries on, since interrupting would break off the main task and
queueing would keep the user waiting.  The side session may
call the read-only tools it needs (:data:`SIDE_TOOL_NAMES`: ``task_status``, ``observe`` for
fresh images, ``observe_scene`` when a vision backend is configured), for at most
:data:`MAX_SIDE_ROUNDS` model calls; any other tool (a skill, ``cancel_task``,
``stop_action``, ``update_plan``, a timer ...) is refused: a side answer never starts or stops
a skill and never changes the task.  Only its final text reaches the user and, marked
``[answered in parallel]``, the main trajectory.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .attention import AttentionEpisode
from .errors import ToolCallRejected
from .model_api import Message, ModelReply, ModelRequest, TextPart, ToolCall, ToolDef
from .planner_calls import observe_scene_msg
from .planner_tools import PLANNER_TOOLS, tool_msg
from .routing import PARALLEL_SYSTEM, TASK_TOOLS
from .text import OPERATOR, OPERATOR_CAP, clean_reply, quote, quote_prefix
from .tool_schema import schema_error

if TYPE_CHECKING:
    from .events import Event
    from .planner_routing import EventRouting, SideCall

SIDE_TOOL_NAMES = ("task_status", "observe", "observe_scene")
MAX_SIDE_ROUNDS = 3  # model calls of one side session (the last one gets no tools)


def side_tools(routing: EventRouting) -> tuple[ToolDef, ...]:
    p = routing.p
    defs = [TASK_TOOLS["task_status"], PLANNER_TOOLS["observe"]]
    if p.scene_observer is not None:
        defs += [d for d in p.scene_observer.tool_defs() if d.name == "observe_scene"]
    return tuple(defs)


def ask(routing: EventRouting, ev: Event) -> None:
    """Start a side session for the question ``ev``."""
    from .planner_routing import SideCall

    p = routing.p
    entry = {"role": "user", "text": ev.content, "by": ev.context.get("by")}
    p.conversation.append(entry)
    now = p.clock.now()
    running = ", ".join(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                        for a in p.actions.values()) or "nothing"
    text = (f"Now: {p.clock.wall()} (UTC)\n"
            f"Main task: {quote(OPERATOR, p.task or '-', OPERATOR_CAP)}\n"
            f"Running: {running}\n\nQuestion: {quote(OPERATOR, ev.content, OPERATOR_CAP)}")
    sc = SideCall("parallel", ev, None, now, time.monotonic(), entry,
                  messages=[Message.user(text)], episode=AttentionEpisode(autonomous=False))
    p.log_event("parallel_question", question=ev.content)
    submit(routing, sc, [])
    routing.side.append(sc)
    p.publish_state()


def submit(routing: EventRouting, sc: SideCall, later: list[tuple[ToolCall, Any]]) -> None:
    """The session's next model call, on the worker: first the tool results that need work
    there (image descriptions, ``observe_scene``), then the call."""
    p = routing.p
    sc.rounds += 1
    tools = side_tools(routing) if sc.rounds < MAX_SIDE_ROUNDS else ()
    provider, timeout = p.provider, p.config.planner.timeout_s
    max_tokens = min(512, p.config.planner.max_tokens)
    messages = sc.messages

    def run() -> ModelReply:
        for _call, work in later:
            messages.append(work())
        req = ModelRequest(PARALLEL_SYSTEM, tuple(messages), tools, max_tokens,
                           purpose="planner")
        return clean_reply(provider.complete(req, timeout_s=timeout))

    sc.future = p.caller.submit(run)
    sc.started_at = p.clock.now()


def carry_on(routing: EventRouting, sc: SideCall, reply: ModelReply) -> bool:
    """The side model asked for tools: answer them (read-only ones; the rest refused) and call
    it again.  False when the reply is the answer."""
    if not reply.tool_calls or sc.rounds >= MAX_SIDE_ROUNDS:
        return False
    p = routing.p
    sc.messages.append(Message("assistant", (TextPart(reply.text),) if reply.text else (),
                               reply.tool_calls))
    later: list[tuple[ToolCall, Any]] = []
    for call in reply.tool_calls:
        try:
            now_msg = answer(routing, sc, call, later)
        except ToolCallRejected as e:
            now_msg = tool_msg(call, f"refused: {e.reason}", error=True)
        if now_msg is not None:
            sc.messages.append(now_msg)
    p.log_event("parallel_tools", question=sc.event.content,
                tools=[c.name for c in reply.tool_calls])
    submit(routing, sc, later)
    routing.side.append(sc)
    return True


def answer(routing: EventRouting, sc: SideCall, call: ToolCall,
           later: list[tuple[ToolCall, Any]]) -> Message | None:
    """One side tool call: its result now, or None when it is made on the worker."""
    p = routing.p
    name, args = call.name, dict(call.arguments)
    if name not in SIDE_TOOL_NAMES or (name == "observe_scene" and p.scene_observer is None):
        p.log_event("parallel_tool_refused", tool=name, question=sc.event.content)
        raise ToolCallRejected(
            f"{quote_prefix(name)} is not a side-answer tool: a side answer is read-only "
            f"({', '.join(t.name for t in side_tools(routing))}); it never starts or stops a "
            "skill or changes the task. Answer the question, or say the main task will do it")
    if call.parse_error:
        raise ToolCallRejected(f"the arguments of {name} were not a JSON object")
    if name in ("task_status", "observe"):
        tool = TASK_TOOLS[name] if name == "task_status" else PLANNER_TOOLS[name]
        err = schema_error(tool.parameters, args, name)
        if err:
            raise ToolCallRejected(err)
    if name == "task_status":
        return tool_msg(call, p.task_tools.task_status(str(args["task_id"])))
    if name == "observe":
        prepared = p.views.observe(args.get("cameras") or None)
        later.append((call, lambda: Message("tool", tuple(prepared.render()), (), call.id)))
        return None
    observer, episode = p.scene_observer, sc.episode
    assert observer is not None and episode is not None
    slot = observer.claim(args, episode)
    later.append((call, lambda: observe_scene_msg(observer, episode, call, args, slot)))
    return None


__all__ = ["MAX_SIDE_ROUNDS", "SIDE_TOOL_NAMES", "answer", "ask", "carry_on", "side_tools"]
