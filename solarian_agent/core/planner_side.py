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

import concurrent.futures as cf
import time
from dataclasses import dataclass, field
from typing import Any

from . import event_types as et
from .attention import AttentionEpisode
from .clock import Clock
from .config import AgentConfig
from .errors import ToolCallRejected
from .events import Event
from .model_api import Message, ModelReply, ModelRequest, TextPart, ToolCall, ToolDef
from .planner_calls import observe_scene_msg
from .planner_journal import Journal
from .planner_state import ActionBook, RunState, Transcript
from .planner_tasks import TaskTools
from .planner_tools import PLANNER_TOOLS, PlannerModel, ToolCatalogue, tool_msg
from .routing import PARALLEL_SYSTEM, TASK_TOOLS
from .text import OPERATOR, OPERATOR_CAP, clean_reply, quote, quote_prefix
from .tool_schema import schema_error
from .views import ViewManager

SIDE_TOOL_NAMES = ("task_status", "observe", "observe_scene")
MAX_SIDE_ROUNDS = 3  # model calls of one side session (the last one gets no tools)


@dataclass
class SideCall:
    """A model call beside the main one, so the main turn never waits on it: the router model
    or a parallel answer."""

    kind: str  # router | parallel
    event: Event
    future: cf.Future[ModelReply] | None
    started_at: float
    wall_start: float
    entry: dict[str, Any] | None = None  # the conversation entry of a parallel question
    # a parallel side session: its messages so far, model calls made, attention episode
    messages: list[Message] = field(default_factory=list)
    rounds: int = 0
    episode: AttentionEpisode | None = None


class SideAnswers:
    """Parallel side sessions: started for a question, carried on while the side model asks
    for read-only tools.  The caller keeps the returned :class:`SideCall` and polls it."""

    def __init__(self, clock: Clock, config: AgentConfig, run: RunState, book: ActionBook,
                 transcript: Transcript, journal: Journal, model: PlannerModel,
                 views: ViewManager, catalogue: ToolCatalogue, task_tools: TaskTools) -> None:
        self._clock = clock
        self._config = config
        self._run = run
        self._book = book
        self._transcript = transcript
        self._journal = journal
        self._model = model
        self._views = views
        self._catalogue = catalogue
        self._task_tools = task_tools

    def tools(self) -> tuple[ToolDef, ...]:
        defs = [TASK_TOOLS["task_status"], PLANNER_TOOLS["observe"]]
        observer = self._catalogue.scene_observer
        if observer is not None:
            defs += [d for d in observer.tool_defs() if d.name == "observe_scene"]
        return tuple(defs)

    def ask(self, ev: Event) -> SideCall:
        """Start a side session for the question ``ev``."""
        entry = self._transcript.say("user", ev.content, by=ev.context.get("by"))
        now = self._clock.now()
        running = ", ".join(f"{a.action_id} {a.tool} ({now - a.started_at:.1f} s)"
                            for a in self._book.running.values()) or "nothing"
        text = (f"Now: {self._clock.wall()} (UTC)\n"
                f"Main task: {quote(OPERATOR, self._run.task or '-', OPERATOR_CAP)}\n"
                f"Running: {running}\n\nQuestion: {quote(OPERATOR, ev.content, OPERATOR_CAP)}")
        sc = SideCall("parallel", ev, None, now, time.monotonic(), entry,
                      messages=[Message.user(text)], episode=AttentionEpisode(autonomous=False))
        self._journal.event(et.ParallelQuestion(question=ev.content))
        self.submit(sc, [])
        return sc

    def submit(self, sc: SideCall, later: list[tuple[ToolCall, Any]]) -> None:
        """The session's next model call, on the worker: first the tool results that need work
        there (image descriptions, ``observe_scene``), then the call."""
        sc.rounds += 1
        tools = self.tools() if sc.rounds < MAX_SIDE_ROUNDS else ()
        provider, timeout = self._model.provider, self._config.planner.timeout_s
        max_tokens = min(512, self._config.planner.max_tokens)
        messages = sc.messages

        def run() -> ModelReply:
            for _call, work in later:
                messages.append(work())
            req = ModelRequest(PARALLEL_SYSTEM, tuple(messages), tools, max_tokens,
                               purpose="planner")
            return clean_reply(provider.complete(req, timeout_s=timeout))

        sc.future = self._model.caller.submit(run)
        sc.started_at = self._clock.now()

    def carry_on(self, sc: SideCall, reply: ModelReply) -> bool:
        """The side model asked for tools: answer them (read-only ones; the rest refused) and
        call it again (the caller keeps polling ``sc``).  False when the reply is the
        answer."""
        if not reply.tool_calls or sc.rounds >= MAX_SIDE_ROUNDS:
            return False
        sc.messages.append(Message("assistant", (TextPart(reply.text),) if reply.text else (),
                                   reply.tool_calls))
        later: list[tuple[ToolCall, Any]] = []
        for call in reply.tool_calls:
            try:
                now_msg = self.answer(sc, call, later)
            except ToolCallRejected as e:
                now_msg = tool_msg(call, f"refused: {e.reason}", error=True)
            if now_msg is not None:
                sc.messages.append(now_msg)
        self._journal.event(et.ParallelTools(question=sc.event.content,
                            tools=[c.name for c in reply.tool_calls]))
        self.submit(sc, later)
        return True

    def answer(self, sc: SideCall, call: ToolCall,
               later: list[tuple[ToolCall, Any]]) -> Message | None:
        """One side tool call: its result now, or None when it is made on the worker."""
        name, args = call.name, dict(call.arguments)
        observer = self._catalogue.scene_observer
        if name not in SIDE_TOOL_NAMES or (name == "observe_scene" and observer is None):
            self._journal.event(et.ParallelToolRefused(tool=name, question=sc.event.content))
            raise ToolCallRejected(
                f"{quote_prefix(name)} is not a side-answer tool: a side answer is read-only "
                f"({', '.join(t.name for t in self.tools())}); it never starts or stops a "
                "skill or changes the task. Answer the question, or say the main task will do it")
        if call.parse_error:
            raise ToolCallRejected(f"the arguments of {name} were not a JSON object")
        if name in ("task_status", "observe"):
            tool = TASK_TOOLS[name] if name == "task_status" else PLANNER_TOOLS[name]
            err = schema_error(tool.parameters, args, name)
            if err:
                raise ToolCallRejected(err)
        if name == "task_status":
            return tool_msg(call, self._task_tools.task_status(str(args["task_id"])))
        if name == "observe":
            prepared = self._views.observe(args.get("cameras") or None)
            later.append((call, lambda: Message("tool", tuple(prepared.render()), (), call.id)))
            return None
        episode = sc.episode
        assert observer is not None and episode is not None
        slot = observer.claim(args, episode)
        later.append((call, lambda: observe_scene_msg(observer, episode, call, args, slot)))
        return None


__all__ = ["MAX_SIDE_ROUNDS", "SIDE_TOOL_NAMES", "SideAnswers", "SideCall"]
