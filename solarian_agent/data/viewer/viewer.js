// Episode viewer: plays the frames embedded in #data on canvases, with the event list and the
// timeline following the playhead.  Everything is in this one file: no network, no build.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const V = { T: 0, playing: false, speed: 1, overlays: true, last: 0, following: true };
  const duration = Math.max(D.duration || 0, 0.001);
  const imgCache = new Map();
  const canvases = [];

  function frameImage(i) {
    let im = imgCache.get(i);
    if (!im) {
      im = new Image();
      im.onload = () => draw();
      im.src = D.frames[i];
      imgCache.set(i, im);
    }
    return im;
  }

  function frameAt(frames, T) {  // the last frame at or before T (binary search)
    let lo = 0, hi = frames.length - 1, best = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (frames[mid][0] <= T + 1e-6) { best = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return best;
  }

  // the controller's own drawing (perception.tracker / images.draw_points): the outline of
  // each tracked mask, 1 px magenta; a box without a mask as its outline; a point as a cross
  // in a circle; nothing filled, so the pixels under it stay visible
  const MAGENTA = "#ff00ff";
  function drawOverlay(ctx, ov, w, h) {
    const sx = w / (ov.size[1] || w), sy = h / (ov.size[0] || h);
    ctx.strokeStyle = MAGENTA; ctx.lineWidth = 1;
    for (const s of ov.shapes || []) {
      const polys = s.polys || [];
      for (const poly of polys) {
        if (poly.length < 2) continue;
        ctx.beginPath();
        poly.forEach((p, k) => (k ? ctx.lineTo(p[0] * sx, p[1] * sy) : ctx.moveTo(p[0] * sx, p[1] * sy)));
        ctx.closePath();
        ctx.stroke();
      }
      if (s.box && !polys.length) {
        ctx.strokeRect(s.box[0] * sx, s.box[1] * sy, (s.box[2] - s.box[0]) * sx, (s.box[3] - s.box[1]) * sy);
      }
      if (s.point) {
        const x = s.point[0] * sx, y = s.point[1] * sy;
        ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(x - 7, y); ctx.lineTo(x + 7, y); ctx.moveTo(x, y - 7); ctx.lineTo(x, y + 7); ctx.stroke();
        ctx.lineWidth = 1;
        ctx.beginPath(); ctx.arc(x, y, 9, 0, 2 * Math.PI); ctx.stroke();
      }
    }
  }

  function draw() {
    let shownOverlays = 0;
    D.cameras.forEach((cam, ci) => {
      const { canvas, caption } = canvases[ci];
      const ctx = canvas.getContext("2d");
      if (!cam.frames.length) return;
      // before a camera's first frame the page shows that frame (it opens on the first frames)
      const k = Math.max(0, frameAt(cam.frames, V.T));
      const [t, idx, ovs0] = cam.frames[k];
      const ovs = t <= V.T + 1e-6 ? ovs0 : [];
      const im = frameImage(idx);
      if (im.complete && im.naturalWidth) {
        if (canvas.width !== im.naturalWidth) { canvas.width = im.naturalWidth; canvas.height = im.naturalHeight; }
        ctx.drawImage(im, 0, 0);
        if (V.overlays) for (const o of ovs) { drawOverlay(ctx, D.overlays[o], canvas.width, canvas.height); shownOverlays++; }
      }
      canvas.dataset.frame = String(k);
      caption.textContent = cam.topic + " · frame " + (k + 1) + "/" + cam.frames.length +
        " · " + t.toFixed(2) + " s" + (ovs.length ? " · " + ovs.length + " overlays" : "");
    });
    document.body.dataset.overlaysShown = String(shownOverlays);
    $("playhead").style.left = "calc(var(--label-w) + (100% - var(--label-w)) * " + (V.T / duration) + ")";
    $("clock").textContent = V.T.toFixed(2) + " / " + duration.toFixed(2) + " s";
    if (D.simulated) $("abs").textContent = "simulated time · run started " + D.t0_iso;
    else if (D.t0) $("abs").textContent = new Date((D.t0 + V.T) * 1000).toISOString();
    markEvents();
  }

  let lastCurrent = null;
  function markEvents() {
    let current = null;
    for (const li of document.querySelectorAll("#events .ev")) {
      const t = li.dataset.t === "" ? null : Number(li.dataset.t);
      const past = t !== null && t <= V.T + 1e-6;
      li.classList.toggle("past", past || t === null);
      if (past) current = li;
      li.classList.remove("current");
    }
    if (current) {
      current.classList.add("current");
      if (V.following && current !== lastCurrent) current.scrollIntoView({ block: "nearest" });
    }
    lastCurrent = current;
  }

  function seek(T) {
    V.T = Math.min(Math.max(0, T), duration);
    draw();
  }

  function loop(now) {
    if (!V.playing) return;
    const dt = V.last ? (now - V.last) / 1000 : 0;
    V.last = now;
    V.T += dt * V.speed;
    if (V.T >= duration) { V.T = duration; setPlaying(false); }
    draw();
    if (V.playing) requestAnimationFrame(loop);
  }

  function setPlaying(on) {
    V.playing = on;
    V.last = 0;
    document.body.dataset.playing = String(on);
    $("play").textContent = on ? "❚❚ Pause" : "▶ Play";
    if (on) {
      if (V.T >= duration) V.T = 0;
      V.following = true;
      requestAnimationFrame(loop);
    }
  }

  function setOverlays(on) {
    V.overlays = on;
    document.body.dataset.overlays = on ? "on" : "off";
    $("ovl").textContent = "Overlays: " + (on ? "on" : "off");
    draw();
  }

  function stepFrame(dir) {
    const times = [];
    for (const cam of D.cameras) for (const f of cam.frames) times.push(f[0]);
    times.sort((a, b) => a - b);
    if (!times.length) { seek(V.T + dir * 0.5); return; }
    if (dir > 0) { const n = times.find((t) => t > V.T + 1e-6); seek(n === undefined ? duration : n); }
    else { const p = times.filter((t) => t < V.T - 1e-6).pop(); seek(p === undefined ? 0 : p); }
  }

  function showDetail(node) {
    const body = $("detail-body");
    body.replaceChildren(node);
    $("detail").hidden = false;
    for (const img of body.querySelectorAll("img[data-src]"))
      if (!img.src && D.images[img.dataset.src]) img.src = D.images[img.dataset.src];
  }

  function showTurn(rel) {
    const sec = Array.from(document.querySelectorAll("#turns section.turn"))
      .find((s) => s.dataset.turn === rel);
    if (!sec) return false;
    const copy = sec.cloneNode(true);
    copy.hidden = false;
    copy.id = "shown-" + sec.id;
    showDetail(copy);
    document.body.dataset.turn = rel;
    return true;
  }

  function imageRefs(obj, out) {
    out = out || [];
    if (typeof obj === "string") { if (obj.startsWith("images/")) out.push(obj); }
    else if (Array.isArray(obj)) for (const v of obj) imageRefs(v, out);
    else if (obj && typeof obj === "object") for (const v of Object.values(obj)) imageRefs(v, out);
    return Array.from(new Set(out));
  }

  function showEvent(i) {
    const ev = D.events[i];
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(ev.detail, null, 2);
    const h = document.createElement("h3");
    h.textContent = ev.kind + (ev.t === null ? "" : " at " + ev.t.toFixed(2) + " s");
    const wrap = document.createElement("div");
    wrap.append(h);
    for (const ref of imageRefs(ev.detail)) {  // what the event names: what the monitor saw
      if (!D.images[ref]) continue;
      const fig = document.createElement("figure");
      fig.className = "turn-img";
      const img = document.createElement("img");
      img.dataset.src = ref;
      const cap = document.createElement("figcaption");
      cap.textContent = ref;
      fig.append(img, cap);
      wrap.append(fig);
    }
    wrap.append(pre);
    showDetail(wrap);
  }

  // ---- build -----------------------------------------------------------------------------
  for (const cam of D.cameras) {
    const fig = document.createElement("figure");
    const canvas = document.createElement("canvas");
    canvas.width = cam.size[0] || 640; canvas.height = cam.size[1] || 480;
    canvas.dataset.topic = cam.topic;
    const cap = document.createElement("figcaption");
    fig.append(canvas, cap);
    $("videos").append(fig);
    canvases.push({ canvas, caption: cap });
  }
  if (!D.cameras.length) {
    const p = document.createElement("p");
    p.className = "muted";
    p.textContent = "No frames: no rosbag recording was found and the log names no images.";
    $("videos").append(p);
  }
  EpisodePlots.build(D, $("rows"), (t, i) => {
    if (i !== null) {  // a mark: its moment, and what it was
      const ev = D.events[i];
      seek(ev.t);
      if (ev.turn) showTurn(ev.turn); else showEvent(i);
    } else seek(t);
  });
  $("events").addEventListener("click", (e) => {
    const link = e.target.closest("a.turn-link");
    const li = e.target.closest("li.ev");
    if (link) { e.preventDefault(); showTurn(link.dataset.turn); }
    else if (li) showEvent(Number(li.dataset.i));
    if (li && li.dataset.t !== "") { V.following = false; seek(Number(li.dataset.t)); }
  });
  document.addEventListener("click", (e) => {
    const link = e.target.closest("a.turn-link");
    if (link && !e.target.closest("#events")) { e.preventDefault(); showTurn(link.dataset.turn); }
  });
  $("events").addEventListener("wheel", () => { V.following = false; });
  $("play").addEventListener("click", () => setPlaying(!V.playing));
  $("speed").addEventListener("change", (e) => { V.speed = Number(e.target.value) || 1; });
  $("ovl").addEventListener("click", () => setOverlays(!V.overlays));
  $("close").addEventListener("click", () => { $("detail").hidden = true; delete document.body.dataset.turn; });
  document.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.key === "o" || e.key === "O") setOverlays(!V.overlays);
    else if (e.key === " ") { e.preventDefault(); setPlaying(!V.playing); }
    else if (e.key === "ArrowRight") { e.preventDefault(); stepFrame(1); }
    else if (e.key === "ArrowLeft") { e.preventDefault(); stepFrame(-1); }
    else if (e.key === "Home") seek(0);
    else if (e.key === "End") seek(duration);
    else if (e.key === "Escape") $("close").click();
  });
  if (location.hash.startsWith("#turn-")) {
    const sec = document.getElementById(location.hash.slice(1));
    if (sec) showTurn(sec.dataset.turn);
  }
  draw();
  document.body.dataset.ready = "true";
})();
