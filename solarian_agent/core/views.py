"""Views for the planner.

The planner reads text and structure every turn; a picture reaches it only when it looks, since
most turns need none and the model decides whether to look, how often and for how long a view
stays.  :class:`ViewManager` gives it three calls:

* ``look(camera=None, region=None)``: a view (or a region of one, as fractions
  ``[x0, y0, x1, y1]`` of the capture) in the tool's result, now;
* ``watch(cameras=None)`` / ``unwatch()``: from now on fresh views come with every turn;
* ``look(keep=N)``: the views of the last N looks stay in the following turns (default 0: a
  view stays for the next reply only); ``look(pin="before")`` keeps that look's view under a
  name until ``unpin("before")``.

``runtime.cameras`` (``fixed``) names views that come with every turn whatever the planner does.
Every view is an observation of the planner's :class:`~.observations.ObservationStore` (an
``obs-N`` id; points read off a region map back to capture pixels exactly).

A planner model that reads no images is sent none: each view it would see is described by the
named vision backend instead (``describer``), marked as a model's description.  Descriptions
are model calls, so the two phases are separate: :meth:`ViewManager.prepare` /
:meth:`ViewManager.capture_for_turn` validate, capture and update the state at once (cheap, on
the planner's tick), and :meth:`PreparedViews.render` produces the parts, calling the describer
where needed; run it on the model worker, never on the control path.  :meth:`handle` and
:meth:`images_for_turn` do both in one call for callers that may block.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import images as im
from .clock import Clock
from .errors import ToolCallRejected
from .messages import Image
from .model_api import ImagePart, ModelError, TextPart, ToolDef
from .observations import Observation, ObservationStore, Overlay
from .text import one_line, planner_wrote, quote, quote_prefix
from .vision import FrameForVision, VisionBackend

Part = TextPart | ImagePart
MAX_KEEP = 8
MAX_PINS = 8
DESCRIBE_FOCUS = ("Describe what the robot's planner needs to act: the objects, where they are "
                  "in the frame, the gripper and what it holds.")


@dataclass
class View:
    observation: Observation
    camera: str
    region: tuple[float, float, float, float] | None
    taken_at: float
    why: str  # look | watch | fixed | pinned:<name> | kept
    description: str | None = None

    @property
    def id(self) -> str:
        return self.observation.id


@dataclass
class PreparedViews:
    """Views captured now; :meth:`render` turns them into parts (may call the describer)."""

    manager: ViewManager
    views: list[View] = field(default_factory=list)
    text: str = ""

    def render(self) -> list[Part]:
        parts: list[Part] = [TextPart(self.text)] if self.text else []
        for v in self.views:
            parts.extend(self.manager._render_view(v))
        return parts


class ViewManager:
    def __init__(
        self,
        clock: Clock,
        store: ObservationStore,
        frames: Callable[[str], Image | None],
        cameras: Sequence[str],
        *,
        reads_images: bool | Callable[[], bool],
        describer: VisionBackend | None = None,
        fixed: Sequence[str] = (),
        describe_timeout_s: float = 30.0,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        overlays: Sequence[Overlay] = (),
    ) -> None:
        unknown = [c for c in fixed if c not in cameras]
        if unknown:
            raise ValueError(f"runtime.cameras names unknown cameras {unknown}; cameras: "
                             f"{', '.join(cameras)}")
        self.clock = clock
        self.store = store
        self._frames = frames
        self.cameras = list(cameras)
        # a callable is asked at every render: a provider may find out that its server takes
        # no images (a local server without a vision model), and from then on its views are
        # described in text
        self._reads_images = reads_images
        self.describer = describer
        self.fixed = list(fixed)
        self.describe_timeout_s = describe_timeout_s
        self.on_event = on_event
        self.overlays = list(overlays)  # the controller's overlays (image_overlays)
        self.watched: list[str] = []
        self.keep = 0
        self.pins: dict[str, list[View]] = {}
        self._looks: collections.deque[list[View]] = collections.deque(maxlen=MAX_KEEP)
        self._fresh_looks = 0  # looks since the last turn's views (already in tool results)
        self.describe_calls = 0

    # tools -----------------------------------------------------------------------------------
    def tool_defs(self) -> list[ToolDef]:
        cams = {"type": "string", "enum": list(self.cameras)}
        return [
            ToolDef("look", "Put a view in your next turn, with this call's result: one "
                            "camera (or all), or a region of one as fractions [x0, y0, x1, y1] "
                            "of the image. keep=N keeps the views of your last N looks in "
                            "later turns; pin=name keeps this look's view until unpin(name).",
                    {"type": "object", "properties": {
                        "camera": cams,
                        "region": {"type": "array", "items": {"type": "number", "minimum": 0,
                                                              "maximum": 1},
                                   "minItems": 4, "maxItems": 4},
                        "keep": {"type": "integer", "minimum": 0, "maximum": MAX_KEEP},
                        "pin": {"type": "string", "minLength": 1, "maxLength": 40}},
                     "additionalProperties": False}),
            ToolDef("watch", "From now on, fresh views of these cameras (default: all) come "
                             "with every turn, until unwatch().",
                    {"type": "object", "properties": {
                        "cameras": {"type": "array", "items": cams}},
                     "additionalProperties": False}),
            ToolDef("unwatch", "Stop the views watch() started.",
                    {"type": "object", "properties": {}, "additionalProperties": False}),
            ToolDef("unpin", "Drop a pinned view.",
                    {"type": "object", "properties": {"name": {"type": "string"}},
                     "required": ["name"], "additionalProperties": False}),
        ]

    TOOL_NAMES = ("look", "watch", "unwatch", "unpin")

    def handle(self, name: str, args: Mapping[str, Any]) -> list[Part]:
        """Prepare and render at once (blocks on descriptions for a text-only planner)."""
        return self.prepare(name, args).render()

    def prepare(self, name: str, args: Mapping[str, Any]) -> PreparedViews:
        """Validate, capture and update the state now; raises :class:`ToolCallRejected`."""
        if name == "look":
            return self._look(args)
        if name == "watch":
            self._only(args, {"cameras"}, name)
            cams = args.get("cameras") or list(self.cameras)
            self._check_cameras(cams)
            self.watched = list(dict.fromkeys(cams))
            return PreparedViews(self, [], f"watching {', '.join(self.watched)}: fresh views "
                                           "come with every turn until unwatch()")
        if name == "unwatch":
            self._only(args, set(), name)
            was = self.watched
            self.watched = []
            return PreparedViews(self, [], "stopped watching " + (", ".join(was) or "nothing"))
        if name == "unpin":
            self._only(args, {"name"}, name)
            pin = str(args.get("name", "")).strip()
            if pin not in self.pins:
                raise ToolCallRejected(f"no view is pinned as {planner_wrote(pin, 60)}; pinned: "
                                       f"{self._pin_names()}")
            del self.pins[pin]
            return PreparedViews(self, [], f"unpinned {planner_wrote(pin, 60)}")
        raise ToolCallRejected(f"unknown view tool {quote_prefix(name)}; view tools: "
                               f"{', '.join(self.TOOL_NAMES)}")

    def _pin_names(self) -> str:
        """The pinned views' names (the planner wrote them), each quoted."""
        return ", ".join(planner_wrote(n, 60) for n in self.pins) or "none"

    def _only(self, args: Mapping[str, Any], allowed: set[str], name: str) -> None:
        extra = sorted(set(args) - allowed)
        if extra:
            raise ToolCallRejected(f"{name} takes {', '.join(sorted(allowed)) or 'nothing'}; "
                                   f"got {', '.join(quote_prefix(x) for x in extra[:5])}")

    def _check_cameras(self, cams: Any) -> None:
        if not isinstance(cams, list) or not all(isinstance(c, str) for c in cams):
            raise ToolCallRejected("cameras must be a list of camera names")
        unknown = [c for c in cams if c not in self.cameras]
        if unknown:
            raise ToolCallRejected(f"unknown cameras "
                                   f"{', '.join(quote_prefix(c) for c in unknown[:5])}; cameras: "
                                   f"{', '.join(self.cameras)}")

    def _look(self, args: Mapping[str, Any]) -> PreparedViews:
        self._only(args, {"camera", "region", "keep", "pin"}, "look")
        cam = args.get("camera")
        if cam is not None and (not isinstance(cam, str) or cam not in self.cameras):
            raise ToolCallRejected(f"camera: unknown {quote_prefix(cam)}; cameras: "
                                   f"{', '.join(self.cameras)}")
        region = args.get("region")
        box: tuple[float, float, float, float] | None = None
        if region is not None:
            if (not isinstance(region, (list, tuple)) or len(region) != 4
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in region)):
                raise ToolCallRejected("region must be [x0, y0, x1, y1] fractions of the image")
            x0, y0, x1, y1 = (float(v) for v in region)
            if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
                raise ToolCallRejected(f"region must satisfy 0 <= x0 < x1 <= 1 and "
                                       f"0 <= y0 < y1 <= 1, got {list(region)}")
            if cam is None and len(self.cameras) > 1:
                raise ToolCallRejected("a region needs a camera: look(camera=..., region=...)")
            box = (x0, y0, x1, y1)
        keep = args.get("keep")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int)
                                 or not 0 <= keep <= MAX_KEEP):
            raise ToolCallRejected(f"keep must be an integer from 0 to {MAX_KEEP}")
        pin = args.get("pin")
        if pin is not None:
            if not isinstance(pin, str) or not pin.strip():
                raise ToolCallRejected("pin must be a non-empty name")
            pin = pin.strip()  # stored trimmed: the same name replaces, never adds, a pin
            if pin not in self.pins and len(self.pins) >= MAX_PINS:
                raise ToolCallRejected(f"at most {MAX_PINS} views can be pinned; unpin one "
                                       f"first ({self._pin_names()})")
        cams = [cam] if isinstance(cam, str) else list(self.cameras)
        views = [v for v in (self._capture(c, box, "look") for c in cams) if v is not None]
        if not views:
            raise ToolCallRejected("no camera has delivered a frame yet")
        if keep is not None:  # a rejected look changes nothing
            self.keep = keep
        self._looks.append(views)
        self._fresh_looks += 1
        notes = []
        if keep is not None:
            notes.append(f"the views of your last {keep} looks stay in later turns" if keep
                         else "views stay for the next reply only")
        if pin is not None:
            self.pins[pin.strip()] = [dataclasses.replace(v, why=f"pinned:{pin.strip()}")
                                      for v in views]
            notes.append(f"pinned as {planner_wrote(pin.strip(), 60)} until unpin with that "
                         "name")
        return PreparedViews(self, views, "; ".join(notes))

    def observe(self, cameras: Sequence[str] | None = None) -> PreparedViews:
        """Fresh whole views of ``cameras`` (default: all) for the planner's ``observe``."""
        cams = list(cameras) if cameras else list(self.cameras)
        self._check_cameras(cams)
        views = [v for v in (self._capture(c, None, "look") for c in cams) if v is not None]
        if not views:
            raise ToolCallRejected("no camera has delivered a frame yet")
        return PreparedViews(self, views, "fresh images:")

    # turns -----------------------------------------------------------------------------------
    def capture_for_turn(self) -> PreparedViews:
        """What comes with this turn: fixed and watched cameras (fresh), pinned views and the
        kept views of earlier looks."""
        views: list[View] = []
        for cam in dict.fromkeys([*self.fixed, *self.watched]):
            v = self._capture(cam, None, "fixed" if cam in self.fixed else "watch")
            if v is not None:
                views.append(v)
        shown = {v.id for v in views}
        for pinned in self.pins.values():
            for v in pinned:
                if v.id not in shown:
                    views.append(v)
                    shown.add(v.id)
        if self.keep:
            looks = list(self._looks)[-self.keep:]
            # the looks since the last turn are in this turn's tool results already
            earlier = looks[:max(0, len(looks) - self._fresh_looks)]
            for look in earlier:
                for v in look:
                    if v.id not in shown:
                        views.append(dataclasses.replace(v, why="kept"))
                        shown.add(v.id)
        self._fresh_looks = 0
        return PreparedViews(self, views)

    def images_for_turn(self) -> list[Part]:
        return self.capture_for_turn().render()

    # capture and render ----------------------------------------------------------------------
    def _capture(self, camera: str, region: tuple[float, float, float, float] | None,
                 why: str) -> View | None:
        frame = self._frames(camera)
        if frame is None:
            return None
        obs = self.store.add(camera, frame, self.overlays, region)
        return View(obs, camera, region, self.clock.now(), why)

    def _caption(self, v: View) -> str:
        age = max(0.0, self.clock.now() - v.observation.capture_stamp)
        what = f"{v.camera} camera"
        if v.region is not None:
            what += " region [" + ", ".join(f"{c:g}" for c in v.region) + "]"
        why = {"look": "", "watch": ", watched", "fixed": ", comes with every turn",
               "kept": ", kept from an earlier look"}.get(v.why, "")
        if v.why.startswith("pinned:"):
            why = f", pinned as {planner_wrote(v.why.split(':', 1)[1], 60)}"
        return (f"{v.id}: {what}, {v.observation.width}x{v.observation.height} px, taken "
                f"{age:.1f} s ago{why}")

    @property
    def reads_images(self) -> bool:
        r = self._reads_images
        return bool(r() if callable(r) else r)

    @reads_images.setter
    def reads_images(self, value: bool) -> None:
        self._reads_images = value

    def _render_view(self, v: View) -> list[Part]:
        cap = self._caption(v)
        o = v.observation
        if self.reads_images:
            return [TextPart(cap), ImagePart(o.data, o.media_type, o.width, o.height, o.id,
                                             v.camera)]
        return [TextPart(f"{cap}. {self._description(v)}")]

    def _description(self, v: View) -> str:
        if v.description is not None:
            return v.description
        text = self._describe(v)
        v.description = text
        for pinned in self.pins.values():  # a pinned copy shares the description
            for p in pinned:
                if p.id == v.id and p.description is None:
                    p.description = text
        for look in self._looks:
            for p in look:
                if p.id == v.id and p.description is None:
                    p.description = text
        return text

    def _describe(self, v: View) -> str:
        d = self.describer
        if d is None:
            return ("[No image: this model reads no images and no vision model is configured "
                    "to describe the view.]")
        o = v.observation
        frame = o.frame.data
        if v.region is not None:
            frame, _ = im.crop_fraction(frame, v.region)
        frame = np.ascontiguousarray(frame)
        data, mt = im.encode(frame)
        self.describe_calls += 1
        try:
            desc = d.describe(FrameForVision(data, mt, frame.shape[1], frame.shape[0],
                                             v.camera, frame), DESCRIBE_FOCUS,
                              timeout_s=self.describe_timeout_s)
        except ModelError as e:
            return (f"[No description: the vision model failed ({e.kind}): "
                    f"{quote('model error', e.message, 600)}]")
        except Exception as e:
            return ("[No description: the vision backend failed: "
                    f"{quote('error', f'{type(e).__name__}: {e}', 600)}]")
        name = getattr(d, "name", "vision")
        model = desc.model or getattr(d, "model", "")
        if self.on_event is not None:
            self.on_event("view_described", {"observation_id": v.id, "backend": name,
                                             "model": model,
                                             "latency_s": round(desc.latency_s, 4)})
        return (f"Described by the vision model {one_line(name, 60)}/{one_line(model, 80)} "
                f"(a model's reading; may be wrong): "
                f"{quote('vision description', desc.text.strip())}")


__all__ = ["PreparedViews", "View", "ViewManager"]
