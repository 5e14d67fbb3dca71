"""Success against dollars per task, one point per model run of the results file, as a
self-contained SVG (or an HTML page holding it and the table): no plotting dependency."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

W, H, PAD = 640, 400, 60


def points(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, float, float, str]]:
    """(model, dollars per task, success %, date) for each model row of each run; the latest
    run of a model wins."""
    latest: dict[str, tuple[str, float, float, str]] = {}
    for rec in records:
        for r in rec.get("summary") or []:
            latest[str(r["model"])] = (str(r["model"]), float(r["usd_per_episode"]),
                                       float(r["success_pct"]), str(rec.get("when", ""))[:10])
    return list(latest.values())


def svg(pts: Sequence[tuple[str, float, float, str]]) -> str:
    """Success (0..100 %) up, dollars per task across on a log scale (a free model at its
    left edge)."""
    costs = [c for _, c, _, _ in pts if c > 0]
    lo = 10 ** math.floor(math.log10(min(costs))) if costs else 1e-4
    hi = 10 ** math.ceil(math.log10(max(costs))) if costs else 1.0
    hi = max(hi, lo * 10)

    def x(c: float) -> float:
        c = max(c, lo)
        return PAD + (W - 2 * PAD) * (math.log10(c) - math.log10(lo)) / (
            math.log10(hi) - math.log10(lo))

    def y(s: float) -> float:
        return H - PAD - (H - 2 * PAD) * s / 100.0

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="black"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 15}" text-anchor="middle">dollars per task (log; '
           f'free at the left edge)</text>',
           f'<text x="15" y="{H / 2}" transform="rotate(-90 15 {H / 2})" '
           'text-anchor="middle">success %</text>']
    for s in (0, 50, 100):
        out.append(f'<text x="{PAD - 5}" y="{y(s) + 4}" text-anchor="end">{s}</text>')
    d = lo
    while d <= hi * 1.0001:
        out.append(f'<text x="{x(d)}" y="{H - PAD + 15}" text-anchor="middle">${d:g}</text>')
        d *= 10
    for name, c, s, when in pts:
        label = html.escape(f"{name} ({when})")
        out.append(f'<circle cx="{x(c):.1f}" cy="{y(s):.1f}" r="5" fill="steelblue">'
                   f'<title>{label}: {s:g} %, ${c:.4f}</title></circle>')
        out.append(f'<text x="{x(c) + 8:.1f}" y="{y(s) - 6:.1f}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_plot(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """The plot at ``path``: ``.svg`` the drawing alone, anything else an HTML page with it
    and one table line per point."""
    pts = points(records)
    pic = svg(pts)
    if path.suffix.lower() == ".svg":
        path.write_text(pic, encoding="utf-8")
        return
    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{s:g} %</td><td>${c:.4f}</td>"
                   f"<td>{html.escape(w)}</td></tr>" for n, c, s, w in pts)
    path.write_text("<!doctype html><meta charset='utf-8'><title>bench agent</title>"
                    f"<h1>Success against dollars per task</h1>{pic}<table border=1>"
                    "<tr><th>model</th><th>success</th><th>$ per task</th><th>measured</th>"
                    f"</tr>{rows}</table>", encoding="utf-8")


__all__ = ["points", "svg", "write_plot"]
