// Episode viewer: the timeline's rows, all on one time axis in seconds from the episode's start.
// Lanes of event marks (agent, planner turns, operator, monitor), the actions' spans, the axis,
// and plots drawn on canvases: joint positions, the jaws' opening, and one plot per monitor
// question (answers by value, their probability, the rules' thresholds).  No network, no build.
"use strict";
const EpisodePlots = (function () {
  const PALETTE = ["#58a6ff", "#3fb950", "#d29922", "#f85149", "#bc8cff", "#39c5cf", "#ff9e3d",
                   "#e3e7ee", "#8b95a5", "#f778ba"];
  const OUTCOME = { succeeded: "#3fb950", failed: "#f85149", stopped: "#8b95a5",
                    refused: "#8b95a5", running: "#d29922" };
  const LANES = [["agent", "agent"], ["turn", "planner turns"], ["operator", "operator"],
                 ["monitor", "monitor"]];

  function niceStep(duration, px) {
    const want = duration / Math.max(2, px / 70);
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(want, 1e-3))));
    for (const m of [1, 2, 5, 10]) if (p * m >= want) return p * m;
    return p * 10;
  }

  function row(rows, kind, label, height, title) {
    const r = document.createElement("div");
    r.className = "row";
    r.dataset.row = kind;
    const l = document.createElement("div");
    l.className = "label";
    l.textContent = label;
    if (title) l.title = title;
    const t = document.createElement("div");
    t.className = "track";
    t.style.height = height + "px";
    r.append(l, t);
    rows.append(r);
    return t;
  }

  function canvasIn(track) {
    const c = document.createElement("canvas");
    track.append(c);
    return c;
  }

  function fit(c) {  // the canvas at the track's size in device pixels; returns its context
    const r = c.parentElement.getBoundingClientRect();
    const k = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.round(r.width * k));
    c.height = Math.max(1, Math.round(r.height * k));
    const ctx = c.getContext("2d");
    ctx.setTransform(k, 0, 0, k, 0, 0);
    ctx.clearRect(0, 0, r.width, r.height);
    return [ctx, r.width, r.height];
  }

  function yAxis(ctx, w, h, lo, hi, fmt) {
    ctx.strokeStyle = "#2c333d"; ctx.fillStyle = "#8b95a5"; ctx.font = "10px sans-serif";
    ctx.lineWidth = 1;
    for (const v of [lo, (lo + hi) / 2, hi]) {
      const y = h - 4 - (h - 8) * (v - lo) / ((hi - lo) || 1);
      ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(w, y); ctx.stroke();
      ctx.fillText(fmt(v), 2, Math.min(h - 2, Math.max(10, y - 2)));
    }
  }

  function legend(ctx, w, items) {  // [[text, colour]] right-aligned along the top
    ctx.font = "11px sans-serif";
    let x = w - 6;
    for (let i = items.length - 1; i >= 0; i--) {
      const [text, c] = items[i];
      const tw = ctx.measureText(text).width;
      x -= tw;
      ctx.fillStyle = c; ctx.fillText(text, x, 11);
      ctx.fillRect(x - 10, 4, 7, 7);
      x -= 18;
    }
  }

  function lines(ctx, w, h, D, ts, series, lo, hi) {
    const X = (t) => w * t / D.duration;
    const Y = (v) => h - 4 - (h - 8) * (v - lo) / ((hi - lo) || 1);
    series.forEach((s, i) => {
      ctx.strokeStyle = s.colour || PALETTE[i % PALETTE.length]; ctx.lineWidth = 1.5;
      ctx.beginPath();
      let pen = false;
      s.values.forEach((v, k) => {
        if (v === null || v === undefined) { pen = false; return; }
        if (pen) ctx.lineTo(X(ts[k]), Y(v)); else ctx.moveTo(X(ts[k]), Y(v));
        pen = true;
      });
      ctx.stroke();
    });
  }

  function range(series, pad) {
    let lo = Infinity, hi = -Infinity;
    for (const s of series) for (const v of s.values) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!isFinite(lo)) return [0, 1];
    const m = (hi - lo) * pad || 0.5;
    return [lo - m, hi + m];
  }

  function build(D, rowsEl, onSeek) {
    const drawers = [];
    const P = D.plots || {};
    const n = {};
    for (const [cat, label] of LANES) {
      const t = row(rowsEl, "lane-" + cat, label, 16);
      t.classList.add("lane");
      n[cat] = t;
    }
    D.events.forEach((ev, i) => {
      if (ev.t === null || !n[ev.cat]) return;
      const m = document.createElement("div");
      m.className = "mark";
      m.dataset.cat = ev.cat;
      m.dataset.i = String(i);
      if (ev.decision) m.dataset.decision = ev.decision;
      m.style.left = (100 * ev.t / D.duration) + "%";
      m.title = ev.t.toFixed(2) + " s " + ev.kind;
      n[ev.cat].append(m);
    });
    const acts = row(rowsEl, "actions", "actions", 20);
    for (const a of P.actions || []) {
      const s = document.createElement("div");
      s.className = "span";
      s.dataset.outcome = a.outcome;
      s.dataset.tool = a.tool;
      s.style.left = (100 * a.start / D.duration) + "%";
      s.style.width = Math.max(0.2, 100 * (a.end - a.start) / D.duration) + "%";
      s.style.background = OUTCOME[a.outcome] || "#58a6ff";
      s.textContent = a.tool;
      s.title = a.id + " " + a.tool + " " + a.start.toFixed(2) + "-" + a.end.toFixed(2) + " s " + a.outcome;
      acts.append(s);
    }
    const axis = canvasIn(row(rowsEl, "axis", "time (s)", 18));
    drawers.push(() => {
      const [ctx, w, h] = fit(axis);
      const step = niceStep(D.duration, w);
      ctx.strokeStyle = "#8b95a5"; ctx.fillStyle = "#8b95a5"; ctx.font = "10px sans-serif";
      for (let t = 0; t <= D.duration + 1e-9; t += step) {
        const x = w * t / D.duration;
        ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, 5); ctx.stroke();
        const label = (step < 1 ? t.toFixed(1) : String(Math.round(t))) + " s";
        ctx.fillText(label, Math.min(x + 2, w - ctx.measureText(label).width - 1), 15);
      }
    });
    if (P.joints && P.joints.length) {
      const c = canvasIn(row(rowsEl, "joints", "joints (rad)", 90, "joint positions from joint_states"));
      drawers.push(() => {
        const [ctx, w, h] = fit(c);
        const [lo, hi] = range(P.joints, 0.08);
        yAxis(ctx, w, h, lo, hi, (v) => v.toFixed(2));
        lines(ctx, w, h, D, P.t, P.joints, lo, hi);
        legend(ctx, w, P.joints.map((s, i) => [s.name, PALETTE[i % PALETTE.length]]));
      });
    }
    if (P.gripper_mm) {
      const c = canvasIn(row(rowsEl, "gripper", "jaws (mm)", 56, "the opening between the jaws"));
      drawers.push(() => {
        const [ctx, w, h] = fit(c);
        const s = [{ values: P.gripper_mm, colour: "#39c5cf" }];
        const [lo, hi] = range(s, 0.1);
        yAxis(ctx, w, h, Math.max(0, lo), hi, (v) => v.toFixed(0));
        lines(ctx, w, h, D, P.t, s, Math.max(0, lo), hi);
      });
    }
    for (const q of P.monitor || []) {
      const label = q.tool + " · " + q.question;
      const rules = q.rules.map((r) => r.text).join("; ");
      const c = canvasIn(row(rowsEl, "monitor-q", label, 64,
        (q.defined ? "rules: " + (rules || "none (shown to the planner only)") : "the question's rules are not in this log")));
      c.parentElement.dataset.question = q.question;
      c.parentElement.dataset.tool = q.tool;
      c.parentElement.dataset.answers = String(q.answers.length);
      c.parentElement.dataset.thresholds = q.rules.filter((r) => r.threshold !== null).map((r) => r.threshold).join(",");
      const colour = (v) => PALETTE[Math.max(0, q.values.indexOf(v)) % PALETTE.length];
      drawers.push(() => {
        const [ctx, w, h] = fit(c);
        const Y = (p) => h - 4 - (h - 16) * p;
        yAxis(ctx, w, h, 0, 1, (v) => "p " + v.toFixed(1));
        ctx.setLineDash([4, 3]); ctx.lineWidth = 1; ctx.font = "10px sans-serif";
        for (const r of q.rules) {
          if (r.threshold === null) continue;
          ctx.strokeStyle = r.value ? colour(r.value) : "#e3e7ee";
          ctx.beginPath(); ctx.moveTo(0, Y(r.threshold)); ctx.lineTo(w, Y(r.threshold)); ctx.stroke();
          ctx.fillStyle = ctx.strokeStyle;
          ctx.fillText(r.text, 40, Y(r.threshold) - 2);
        }
        ctx.setLineDash([]);
        for (const a of q.answers) {
          if (a.p === null) continue;
          const x = w * a.t / D.duration, y = Y(a.p);
          ctx.fillStyle = colour(a.value);
          ctx.beginPath(); ctx.arc(x, y, 3.5, 0, 2 * Math.PI); ctx.fill();
          if (a.decision) {
            ctx.strokeStyle = a.decision === "fail" ? "#f85149" : a.decision === "finish" ? "#3fb950" : "#ff9e3d";
            ctx.lineWidth = 2; ctx.beginPath(); ctx.arc(x, y, 7, 0, 2 * Math.PI); ctx.stroke();
          }
        }
        legend(ctx, w, q.values.map((v) => [v, colour(v)]));
      });
    }
    rowsEl.addEventListener("click", (e) => {
      const track = e.target.closest(".track");
      if (!track) return;
      const mark = e.target.closest(".mark");
      if (mark) { onSeek(null, Number(mark.dataset.i)); return; }
      const r = track.getBoundingClientRect();
      onSeek(D.duration * Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)), null);
    });
    const drawAll = () => drawers.forEach((d) => d());
    window.addEventListener("resize", drawAll);
    drawAll();
    document.body.dataset.plots = Array.from(rowsEl.querySelectorAll(".row"))
      .map((r) => r.dataset.row).join(",");
    return drawAll;
  }

  return { build, niceStep };
})();
