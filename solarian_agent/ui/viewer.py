"""``solarian-agent view-episode <episode dir>``: one self-contained HTML page for an episode.

The page opens on the episode's first frames and plays them as a video with its events beside
it and below it on one time axis in seconds from the episode's start: labelled lanes for the
agent's events, the planner's turns, the operator's actions and the monitor's verdicts (by
decision); the spans of the actions; plots of the joint positions and the jaws' opening;
and one plot per monitor question with its answers, their probabilities and the thresholds of
its rules.  The trackers' overlays are drawn on the frames they were logged for, as the
controller draws them on the planner's images (the mask's outline; ``o`` toggles them);
clicking a planner turn shows what the planner was sent and what it replied.

It reads the episode log (``logs/``, or ``agent/`` for sessions recorded before ``logs/``:
``events.jsonl``, ``turns/``, ``images/``, ``overlays/``) and the episode's rosbag2 recording
(camera frames, raw or compressed; joint states; the agent's, the operator's and the monitor's
topics where the log lacks them).  The bag is found next to the log, inside the episode
directory, or in the robot's recording of the same session; ``--bag`` names it.  The data is
gathered by :mod:`.episode_data`, :mod:`.episode_bag` and :mod:`.episode_plots`.

Without a bag the "video" is the images the planner saw, at the times it saw them.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ..cli_common import CliParser
from ..core import names
from .episode_bag import load_bag
from .episode_data import (
    Episode,
    find_bags,
    find_log_dir,
    frames_from_log_images,
    iso,
    iso_to_epoch,
    load_log,
    load_overlays,
)
from .episode_plots import plot_data
from .event_lines import compact, describe_event

log = logging.getLogger(__name__)

MONITOR_KINDS = ("monitor_answer", "monitor_decision", "monitor_verdict")
OPERATOR_KINDS = ("operator_takeover", "operator_event", "run_paused", "run_resumed")


def load_episode(path: Path, *, bags: Sequence[Path] | None = None, fps: float = 5.0,
                 max_side: int = 480, max_frames: int = 3000, quality: int = 75) -> Episode:
    episode_dir, log_dir = find_log_dir(Path(path))
    ep = Episode(episode_dir, log_dir)
    if log_dir is not None:
        load_log(ep, log_dir)
    ep.bags = list(bags) if bags is not None else find_bags(episode_dir, log_dir)
    if log_dir is None and not ep.bags:
        raise FileNotFoundError(f"{path}: no events.jsonl (in logs/ or agent/) and no rosbag2 "
                                "recording found")
    offset = None
    for bag in ep.bags:
        try:
            offset = load_bag(ep, bag, fps, max_side, max_frames, quality, offset)
        except Exception as e:  # one unreadable bag never loses the log
            ep.warnings.append(f"could not read the bag {bag}: {type(e).__name__}: {e}")
            log.warning("could not read the bag %s", bag, exc_info=True)
    if ep.frames:
        ep.frames_from = "bag"
    elif ep.images:
        frames_from_log_images(ep, max_side, quality)
    if log_dir is not None and ep.frames_from == "bag":
        load_overlays(ep, log_dir)
    ep.events.sort(key=lambda e: (e.get("_ts") is None, e.get("_ts") or 0.0, e.get("_n", 0)))
    return ep


# ----------------------------------------------------------------------------------------
# HTML
# ----------------------------------------------------------------------------------------
def _asset(name: str) -> str:
    return resources.files("solarian_agent").joinpath("data", "viewer", name).read_text(
        encoding="utf-8")


def _data_uri(data: bytes, name: str = ".jpg") -> str:
    mime = "image/png" if name.lower().endswith(".png") else "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _category(ev: dict[str, Any]) -> str:
    kind = str(ev.get("kind", ""))
    if kind == "planner_turn":
        return "turn"
    if kind in MONITOR_KINDS:
        return "monitor"
    if ev.get("by") == "operator" or kind in OPERATOR_KINDS:
        return "operator"
    return "agent"


def turn_anchor(rel: str) -> str:
    return "turn-" + re.sub(r"[^0-9A-Za-z]+", "-", Path(rel).stem)


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _pre(obj: Any) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, indent=2, ensure_ascii=False,
                                                       default=str)
    return f"<pre>{_esc(text)}</pre>"


def _render_content(content: Any) -> str:
    parts = []
    for c in content if isinstance(content, list) else []:
        if not isinstance(c, dict):
            continue
        if c.get("type") == "image":
            f = str(c.get("file", ""))
            parts.append(f'<figure class="turn-img"><img alt="{_esc(f)}" data-src="{_esc(f)}">'
                         f'<figcaption>{_esc(c.get("observation_id", ""))} {_esc(f)} '
                         f'{_esc(c.get("size", ""))}</figcaption></figure>')
        else:
            parts.append(_pre(str(c.get("text", ""))))
    return "".join(parts)


def render_turn(rel: str, turn: dict[str, Any], ev: dict[str, Any] | None) -> str:
    inp = turn.get("input") or {}
    out = turn.get("output")
    err = turn.get("error")
    head = [f"<h3>{_esc(rel)}</h3>", '<p class="muted">']
    if ev is not None:
        head.append(f"at {_esc(ev.get('t', ''))}, latency {_esc(ev.get('latency_s', '?'))} s, ")
    head.append(f"generation {_esc(turn.get('generation', '?'))}")
    if isinstance(out, dict):
        head.append(f", model {_esc(out.get('model', ''))}, stop {_esc(out.get('stop_reason'))}"
                    f", usage {_esc(compact(out.get('usage', {}), 200))}")
    head.append("</p>")
    sent = ["<h4>Sent</h4>"]
    if inp.get("messages_from"):
        sent.append(f'<p class="muted">messages from #{_esc(inp["messages_from"])} (the run '
                    "continued from an earlier episode)</p>")
    sent.append(f"<details><summary>system prompt</summary>{_pre(inp.get('system', ''))}"
                "</details>")
    tools = inp.get("tools") or []
    sent.append(f"<details><summary>{len(tools)} tools: "
                f"{_esc(', '.join(str(t.get('name')) for t in tools if isinstance(t, dict)))}"
                f"</summary>{_pre(tools)}</details>")
    for i, m in enumerate(inp.get("messages") or []):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", ""))
        extra = ""
        if m.get("tool_call_id"):
            extra = f' <span class="muted">result of {_esc(m["tool_call_id"])}'
            extra += " (error)</span>" if m.get("is_error") else "</span>"
        body = _render_content(m.get("content"))
        if m.get("tool_calls"):
            body += _pre(m["tool_calls"])
        sent.append(f'<div class="tmsg" data-role="{_esc(role)}"><div class="role">#{i} '
                    f"{_esc(role)}{extra}</div>{body}</div>")
    reply = ["<h4>Replied</h4>"]
    if isinstance(out, dict):
        if out.get("text"):
            reply.append(_pre(out["text"]))
        for c in out.get("tool_calls") or []:
            if isinstance(c, dict):
                pe = f' <span class="bad">parse error: {_esc(c["parse_error"])}</span>' if \
                    c.get("parse_error") else ""
                reply.append(f'<div class="call"><b>{_esc(c.get("name"))}</b> '
                             f'<span class="muted">{_esc(c.get("id", ""))}</span>{pe}'
                             f"{_pre(c.get('arguments', {}))}</div>")
    if err:
        reply.append(f'<div class="bad">error: {_esc(compact(err, 500))}</div>')
    if not isinstance(out, dict) and not err:
        reply.append('<p class="muted">no reply recorded</p>')
    return "".join(head + sent + reply)


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 3)


def render_html(ep: Episode) -> str:
    """The episode's page: one self-contained HTML file (assets, frames and data inlined)."""
    times = [e["_ts"] for e in ep.events if e.get("_ts") is not None]
    times += [f.t for frames in ep.frames.values() for f in frames]
    t0 = min(times) if times else 0.0
    t1 = max(times) if times else 0.0
    turn_events = _turn_events(ep)
    rows, data_events = _event_list(ep, t0)
    cameras, frame_images = _camera_frames(ep, t0)
    walls = [w for w in (iso_to_epoch(e.get("t")) for e in ep.events) if w is not None]
    data = {
        "title": ep.title, "t0": t0, "simulated": ep.simulated,
        "t0_iso": (iso(min(walls)) if walls else "") if ep.simulated else
        (iso(t0) if times else ""),
        "duration": round(t1 - t0, 3), "cameras": cameras, "frames": frame_images,
        "overlays": ep.overlays, "events": data_events,
        "images": {rel: _data_uri(b, rel) for rel, b in ep.images.items()},
        "frames_from": ep.frames_from, "plots": plot_data(ep, t0, t1),
    }
    blob = json.dumps(data, ensure_ascii=False, default=str).replace("<", "\\u003c")
    sections = [f'<section class="turn" id="{turn_anchor(rel)}" data-turn="{_esc(rel)}"'
                f' hidden>{render_turn(rel, turn, turn_events.get(rel))}</section>'
                for rel, turn in ep.turns.items()]  # every turn file, linked from its event
    orphan_links = "".join(
        f'<a class="turn-link" href="#{turn_anchor(rel)}" data-turn="{_esc(rel)}">{_esc(rel)}</a> '
        for rel in ep.turns if rel not in turn_events)
    warn = "".join(f"<li>{_esc(w)}</li>" for w in ep.warnings)
    subs = {
        "TITLE": _esc(ep.title),
        "CSS": _asset("viewer.css"),
        "JS": _asset("viewer.js"),
        "PLOTS_JS": _asset("viewer_plots.js"),
        "DATA": blob,
        "SUMMARY": _esc(_summary(ep, data_events, t1 - t0)),
        "SOURCE": _esc(f"{ep.episode_dir} — log: {_show(ep.log_dir, ep.episode_dir)}; "
                       f"bags: {', '.join(_show(b, ep.episode_dir) for b in ep.bags) or 'none'}"),
        "WARNINGS": f'<ul class="warnings">{warn}</ul>' if warn else "",
        "EVENTS": "\n".join(rows),
        "TURNS": "\n".join(sections),
        "ORPHANS": f'<p class="muted">turns without an event: {orphan_links}</p>'
                   if orphan_links else "",
    }
    page = _asset("viewer.html")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: subs.get(m.group(1), m.group(0)), page)


def _turn_events(ep: Episode) -> dict[str, dict[str, Any]]:
    """Each planner turn's (first) ``planner_turn`` event."""
    turn_events: dict[str, dict[str, Any]] = {}
    for e in ep.events:
        if e.get("kind") == "planner_turn" and e.get("turn"):
            turn_events.setdefault(str(e["turn"]), e)
    return turn_events


def _event_list(ep: Episode, t0: float) -> tuple[list[str], list[dict[str, Any]]]:
    """The event list as HTML rows (rendered here, so it is in the page whatever JS does) and
    as the page script's data."""
    rows = []
    data_events = []
    for i, e in enumerate(ep.events):
        kind = str(e.get("kind", ""))
        cat = _category(e)
        rest = {k: v for k, v in e.items() if not k.startswith("_")}
        at = _rel(e.get("_ts"), t0)
        rows.append(_event_row(i, e, kind, cat, rest, at))
        data_events.append({"t": at, "kind": kind, "cat": cat,
                            "decision": str(e.get("decision") or ""),
                            "turn": str(e.get("turn", "")) if kind == "planner_turn" else "",
                            "detail": rest})
    return rows, data_events


def _event_row(i: int, e: dict[str, Any], kind: str, cat: str, rest: dict[str, Any],
               at: float | None) -> str:
    text = describe_event(kind, {k: v for k, v in rest.items() if k not in ("t", "kind")})
    when = "" if at is None else f"{at:8.2f}"
    link = ""
    if kind == "planner_turn" and e.get("turn"):
        anchor = turn_anchor(str(e["turn"]))
        link = (f' <a class="turn-link" href="#{anchor}" data-turn="{_esc(e["turn"])}">'
                f"{_esc(e['turn'])}</a>")
    by = f' <span class="by">{_esc(e["by"])}</span>' if e.get("by") else ""
    src = ' <span class="src">bag</span>' if e.get("_src") == "bag" else ""
    return (f'<li class="ev" id="ev-{i}" data-i="{i}" data-cat="{cat}" data-kind="{_esc(kind)}"'
            f' data-t="{"" if at is None else at}" data-decision="{_esc(e.get("decision", ""))}"'
            f'><span class="when">{when}</span> <span class="kind">{_esc(kind)}</span>{by}{src} '
            f'<span class="text">{_esc(text)}</span>{link}</li>')


def _camera_frames(ep: Episode, t0: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Each camera's frames (time, index into the frame images, overlays) and its size, and
    the frame images as data URIs; the planner's view last."""
    frame_images: list[str] = []
    cameras = []
    order = sorted(ep.frames, key=lambda t: t == names.AGENT_VIEW)
    for topic in order:
        frames = ep.frames[topic]
        rows_f = []
        for f in frames:
            frame_images.append(_data_uri(f.jpeg))
            rows_f.append([round(f.t - t0, 3), len(frame_images) - 1, f.overlays])
        w = max((f.width for f in frames), default=0)
        h = max((f.height for f in frames), default=0)
        cameras.append({"topic": topic, "frames": rows_f, "size": [w, h]})
    return cameras, frame_images


def _summary(ep: Episode, data_events: list[dict[str, Any]], duration: float) -> str:
    counts = {c: sum(1 for e in data_events if e["cat"] == c)
              for c in ("agent", "operator", "monitor", "turn")}
    return (f"{len(ep.events)} events ({counts['agent']} agent, "
            f"{counts['operator']} operator, {counts['monitor']} monitor, "
            f"{counts['turn']} planner turns); frames from {ep.frames_from}; "
            f"{sum(len(f) for f in ep.frames.values())} frames on "
            f"{len(ep.frames)} cameras; {_fmt_duration(duration)}")


def _show(p: Path | None, base: Path) -> str:
    if p is None:
        return "none"
    try:
        return str(p.resolve().relative_to(base.resolve())) + "/"
    except ValueError:
        return str(p)


def _fmt_duration(s: float) -> str:
    s = max(0.0, s)
    return f"{int(s // 60)}:{s % 60:04.1f}"


def write_viewer(episode: Path, out: Path | None = None, **kw: Any) -> Path:
    ep = load_episode(episode, **kw)
    out = out or ep.episode_dir / "viewer.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render_html(ep), encoding="utf-8")
    tmp.replace(out)
    return out


def _serve(path: Path, port: int) -> None:  # pragma: no cover - interactive
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving http://127.0.0.1:{httpd.server_address[1]}/{path.name}  "
              "(Ctrl+C to stop)", flush=True)
        try:
            httpd.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass


def main_view_episode(argv: Sequence[str] | None = None) -> int:
    p = CliParser(
        prog="solarian-agent view-episode",
        description="Write a self-contained HTML viewer for an episode: video, events on one "
                    "timeline, overlays (o), planner turns (click).")
    p.add_argument("episode", type=Path, help="the episode directory (or its logs/ dir)")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="where to write the page (default: <episode>/viewer.html)")
    p.add_argument("--bag", type=Path, action="append", default=None,
                   help="a rosbag2 directory to read frames from (default: found nearby)")
    p.add_argument("--fps", type=float, default=5.0, help="frames per second kept (default 5)")
    p.add_argument("--max-side", type=int, default=480, help="frame size in the page")
    p.add_argument("--max-frames", type=int, default=3000, help="frames per camera at most")
    p.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1")
    p.add_argument("--port", type=int, default=0,
                   help="with --serve: the TCP port (default 0: any free one)")
    a = p.parse_args(list(argv) if argv is not None else None)
    if a.fps <= 0 or a.max_side < 16 or a.max_frames < 1:
        print("view-episode: --fps must be > 0, --max-side >= 16, --max-frames >= 1",
              file=sys.stderr)
        return 2
    try:
        out = write_viewer(a.episode, a.out, bags=a.bag, fps=a.fps, max_side=a.max_side,
                           max_frames=a.max_frames)
    except FileNotFoundError as e:
        print(f"view-episode: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    if a.serve:
        _serve(out, a.port)
    return 0

