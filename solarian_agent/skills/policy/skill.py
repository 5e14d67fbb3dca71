"""``PolicySkill``: a skill whose behaviour is a learned policy, described by its config.

It is bound to a policy config yaml (:mod:`.config`), loaded once when the tools are built
(:func:`load_policy`: a missing backend, a missing file or a model whose inputs and outputs do
not match the config stops the start-up with the reason).  Its tool spec is the yaml's
``agent:`` block, with ``ends_by_itself: False``: it runs until a monitor finish or fail rule
(its ``then``, e.g. ``home_holding``, then starts without waking the planner), its
``max_duration_s``, the planner or the operator stops it.

On the control loop it only builds observations, submits them and polls
(:class:`~.runner.ChunkRunner`): inference runs on its own thread in real time, inline in
simulated time (``inference`` bound: ``thread`` | ``inline``).  Every action is a joint target
sent through the arm port, so the arm driver's safety layer clamps it to the same joint, speed,
step and workspace limits as every other command (a non-finite target fails the skill).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import SkillFailed
from ...core.skill import Skill, ToolSpec, TrackerRequest
from .backends import PolicyBackend, actions_from_output, open_backend
from .config import PolicyConfig, load_policy_config
from .observations import ObservationBuilder, to_targets
from .runner import ChunkRunner, Inference, Worker, chunk_outputs, make_worker


@dataclass(frozen=True)
class LoadedPolicy:
    """A policy config with its backend, opened and checked."""

    config: PolicyConfig
    backend: PolicyBackend

    def __repr__(self) -> str:  # bound params may be shown in logs: name the file only
        return f"LoadedPolicy({self.config.path.name}, {self.config.backend})"


_cache: dict[Path, LoadedPolicy] = {}


def load_policy(path: str | Path, *, cache: bool = True) -> LoadedPolicy:
    """The policy of the config at ``path`` (opened once per file and process)."""
    p = Path(path).expanduser().resolve()
    if cache and p in _cache:
        return _cache[p]
    cfg = load_policy_config(p)
    loaded = LoadedPolicy(cfg, open_backend(cfg))
    if cache:
        _cache[p] = loaded
    return loaded


class PolicySkill(Skill):
    ends_by_itself = False

    @staticmethod
    def _policy(bound: Mapping[str, Any]) -> LoadedPolicy:
        pol = bound.get("policy")
        if isinstance(pol, LoadedPolicy):
            return pol
        if isinstance(pol, (str, Path)):
            return load_policy(pol)
        raise SkillFailed("a policy skill needs a bound 'policy' (a policy config yaml)")

    @classmethod
    def tool_spec(cls, bound: Mapping[str, Any]) -> ToolSpec:
        ag = cls._policy(bound).config.agent
        return ToolSpec(name="", description=ag.description, parameters=ag.parameters,
                        image_points=ag.image_points, examples=ag.examples,
                        ends_by_itself=False, max_duration_s=ag.max_duration_s,
                        max_target_area=ag.max_target_area, monitor=ag.monitor,
                        camera=bound.get("camera", ag.camera), resources=("arm",))

    @classmethod
    def services_for(cls, params: Mapping[str, Any]) -> list[TrackerRequest]:
        cfg = cls._policy(params).config
        if "point" not in cfg.agent.image_points:
            return []
        cam = str(params.get("camera") or cfg.agent.camera or cfg.state.goal_camera)
        return [TrackerRequest(f"{cam}.target", cam, "point")]

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.loaded = self._policy(self.params)
        cfg = self.loaded.config
        self.builder = ObservationBuilder(cfg, self.ctx.ports, self.params)
        self.worker: Worker = make_worker(self.loaded.backend,
                                          str(self.params.get("inference", "thread")))
        self.runner = ChunkRunner(cfg.chunking, self.worker, self.builder.build, self._decode)
        self.feedback("waiting for the first chunk", -1.0)
        self.runner.start(self.ctx.clock.now())

    def _decode(self, res: Inference) -> list[dict[str, float]]:
        cfg = self.loaded.config
        assert res.outputs is not None
        try:
            rows = actions_from_output(cfg, chunk_outputs(res.outputs, cfg.action.output))
        except Exception as e:  # the backend answered something else than it promised
            raise SkillFailed(f"the policy's output does not match the config: {e}") from None
        return [to_targets(cfg, r, res.observed) for r in rows]

    def tick(self) -> None:
        d = self.runner.tick(self.ctx.clock.now())
        if self.runner.error:
            self.fail(self.runner.error)
        arm = self.ctx.port("arm")
        if d.kind == "send":
            arm.command(d.targets)  # through the driver's limits; non-finite: SkillFailed
            self.feedback(f"running policy (chunk {self.runner.chunks}, action {d.index})")
        elif d.kind == "hold":
            arm.hold()
            self.feedback("holding: the next chunk is late")
        else:  # between the policy's actions: its newest target, again, outlives the watchdog
            arm.keep_alive()
        self.result["policy"] = self.runner.stats()

    def on_stop(self, reason: str) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
        runner = getattr(self, "runner", None)
        if runner is not None:
            self.result["policy"] = runner.stats()
        try:
            self.ctx.port("arm").hold()
        except SkillFailed:
            pass
