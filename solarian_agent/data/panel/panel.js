// Operator panel: everything arrives pushed over one EventSource (/events); commands are JSON
// POSTs carrying this page's token.  The token (the page's credential for the control lock)
// arrives once, in this page's own hello, and lives only in this page's memory.  Camera
// frames are announced by the server and fetched once per announcement, one request in
// flight per camera, so a slow page never piles requests up.
"use strict";

const $ = (id) => document.getElementById(id);
const S = { client: null, token: null, holder: null, state: null, operator: null, want: {},
            shown: {}, loading: {}, events: 0,
            estop: { available: true, latched: false, reason: "", t: null } };
const MAX_EVENTS = 300;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined)
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function short(obj, n) {
  let s;
  try { s = typeof obj === "string" ? obj : JSON.stringify(obj); } catch (_) { s = String(obj); }
  return s && s.length > n ? s.slice(0, n - 1) + "…" : (s || "");
}

function notice(text) { $("notice").textContent = text || ""; }

async function post(path, payload, quiet) {
  try {
    const r = await fetch(path, { method: "POST", headers: { "content-type": "application/json" },
                                  body: JSON.stringify(Object.assign({ token: S.token }, payload || {})) });
    const data = await r.json().catch(() => ({ ok: r.ok, reason: r.statusText }));
    if (!data.ok) { if (!quiet) notice(data.reason || ("failed: " + r.status)); }
    else notice("");
    return data;
  } catch (e) {
    notice("not sent: " + e);
    return { ok: false, reason: String(e) };
  }
}

// ---- rendering --------------------------------------------------------------------------
const STATUS_TEXT = { connecting: "connecting…", waiting_user: "waiting for you",
                      budget_exhausted: "budget used up" };

function renderState() {
  const st = S.state || {};
  const status = st.status || "connecting";
  $("status").textContent = STATUS_TEXT[status] || status.replace(/_/g, " ");
  $("status").dataset.status = status;
  $("task").textContent = st.task || "";
  $("generation").textContent = st.generation ? "gen " + st.generation : "";
  // each node of the graph, as the planner sees it (a lost node is said, a node back too)
  $("nodes").replaceChildren(...(st.nodes || []).map(n =>
    el("span", { class: "node", "data-node": n.node, "data-state": n.state,
                 title: `${n.node}: ${n.state} for ${Number(n.since_s || 0).toFixed(0)} s` },
       `${n.node} ${n.state}`)));

  const plan = $("plan");
  plan.replaceChildren();
  for (const step of st.plan || []) {
    plan.append(el("li", { "data-status": step.status || "pending", "data-step": step.step },
      step.description || "",
      step.tool ? el("span", { class: "tool" }, " " + step.tool) : null,
      el("span", { class: "state" }, step.status || "pending")));
  }
  if (!plan.children.length) plan.append(el("li", { class: "empty muted" }, "no plan yet"));

  const acts = $("actions");
  acts.replaceChildren();
  for (const a of st.actions || []) {
    const li = el("li", { "data-action": a.action_id, "data-tool": a.tool },
      el("span", { class: "elapsed", "data-action": a.action_id },
         (Number(a.elapsed_s) || 0).toFixed(1) + " s"),
      el("span", { class: "tool" }, a.tool), " ", el("span", { class: "muted" }, a.action_id),
      " ", el("span", { class: "muted" }, short(a.params || {}, 80)));
    for (const v of a.verdicts || []) li.append(verdictEl(v));
    acts.append(li);
  }
  if (!acts.children.length) acts.append(el("li", { class: "empty muted" }, "nothing running"));

  const conv = $("conversation");
  const atBottom = conv.scrollHeight - conv.scrollTop - conv.clientHeight < 40;
  conv.replaceChildren();
  for (const m of st.conversation || []) {
    const role = m.role === "user" ? "user" : (m.role === "system" ? "system" : "agent");
    conv.append(el("div", { class: "msg", "data-role": role, "data-note": m.note || "",
                            "data-pending": m.pending ? "true" : "false" },
                   m.text || "",
                   m.pending ? el("span", { class: "pending muted" },
                                  " (sent; the agent has not taken it in yet)") : null));
  }
  if (atBottom) conv.scrollTop = conv.scrollHeight;
  renderTakeover();
  renderControls();
}

// what this page may press now: the lock, the run's status and the e-stop decide
function renderControls() {
  const mine = !!(S.client && S.holder === S.client);
  const status = (S.state && S.state.status) || "connecting";
  const latched = !!(S.estop && S.estop.latched);
  const active = status === "running" || status === "waiting_user";
  const input = $("input");
  let blocked = "";
  if (latched) {
    blocked = "E-stop latched" + (S.estop.reason ? " (" + S.estop.reason + ")" : "") +
      ": messages are off until the e-stop is reset (the run would resume into refused skills).";
  }
  input.disabled = latched;
  $("send").disabled = !mine || latched;
  input.placeholder = latched ? "E-stop latched: reset the e-stop to send" :
    mine ? "Type a task, or /pause, /resume, /takeover, /cancel, /reset, /estop" :
    "Viewing only (take control to send); /cancel, /pause and /estop still work";
  input.title = blocked;
  $("blocked").hidden = !blocked;
  $("blocked").textContent = blocked;
  $("pause").disabled = !active;
  $("resume").disabled = !mine || latched || status !== "paused";
  $("resume").title = latched ? "Reset the e-stop first" : status !== "paused"
    ? "Nothing to resume (the run is " + status.replace(/_/g, " ") + ")"
    : (mine ? "Resume the paused run" : "Resuming needs the control lock");
  $("resume-banner").hidden = status !== "paused";
  $("resume-banner").disabled = $("resume").disabled;
  $("takeover-btn").disabled = !mine;
  $("reset").disabled = !mine;
  $("estop-reset").disabled = !mine;
}

function verdictEl(v) {
  const p = typeof v.probability === "number" ? " p=" + v.probability.toFixed(2) : "";
  const d = v.decision ? " → " + v.decision : "";
  return el("span", { class: "verdict", "data-decision": v.decision || "",
                      "data-question": v.question || "" },
            (v.source === "controller" ? "controller: " : "monitor: ") +
            (v.question || "") + " = " + (v.value || "") + p + d +
            (v.reason ? " (" + v.reason + ")" : ""));
}

function renderTakeover() {
  const op = S.operator;
  const paused = S.state && S.state.status === "paused";
  // the e-stop has its own banner: its operator events alone do not show as a takeover
  const estopOnly = op && /^(estop|estop_reset|e-stop|released the e-stop)/.test(op.action || "");
  $("takeover").hidden = !((op && !estopOnly) || paused);
  $("takeover-hint").hidden = !paused;
  $("takeover-hint").textContent = S.estop && S.estop.latched
    ? "The run is paused; reset the e-stop, then your next message resumes it."
    : "The run is paused; your next message (or Resume) resumes it.";
  $("takeover-title").textContent = op && op.action === "pause" ? "Paused by the operator."
    : (op && !estopOnly ? "Operator takeover." : "Paused.");
  const d = (op && op.detail) || {};
  const words = d.note ? "note: " + d.note : (Object.keys(d).length ? short(d, 120) : "");
  $("takeover-text").textContent = op && !estopOnly
    ? (op.action === "pause" ? "" : (op.action || "") + " ") + words : "";
}

function addEvent(ev) {
  const list = $("events");
  const t = (ev.t || "").replace(/^.*T/, "").replace("Z", "");
  list.append(el("li", { "data-kind": ev.kind || "", "data-by": ev.by || "",
                         "data-internal": ev.internal ? "true" : "false" },
                 el("span", { class: "t" }, t), ev.text || ev.kind));
  while (list.children.length > MAX_EVENTS) list.firstChild.remove();
  list.scrollTop = list.scrollHeight;
}

function renderEstop() {
  const e = S.estop || {};
  const button = $("estop");
  button.dataset.available = e.available === false ? "false" : "true";
  button.textContent = e.available === false ? "E-STOP unavailable" : "E-STOP";
  button.title = e.available === false
    ? "No e-stop service on the bus (is the arm driver or the simulator running?); " +
      "Cancel still stops the agent. Pressing retries."
    : "Latch the arm's e-stop: it stops and holds where it is and every skill is refused " +
      "until the e-stop is reset (any viewer, no control lock needed)";
  $("estop-banner").hidden = !e.latched;
  $("estop-reason").textContent = e.latched ? (e.reason || "") : "";
  document.body.dataset.estop = e.latched ? "latched" : "clear";
  renderTakeover();
  renderControls();
}

function renderLock() {
  const mine = S.client && S.holder === S.client;
  const lock = $("lock");
  lock.dataset.mine = mine ? "true" : "false";
  lock.textContent = mine ? "You have control" :
    (S.holder ? "Viewing — another viewer has control" : "Viewing — no one has control");
  $("take").hidden = !!mine;
  $("estop-reset").title = mine ? "Release the e-stop" :
    "Releasing the e-stop needs the control lock";
  renderControls();
}

// ---- the robot (bring-up's readiness: text, set with textContent only) ------------------
// the arm's command gate: who holds the arm, and the last commands it refused
function renderGate(g) {
  $("arm-holder").textContent = "arm: " + (g.holder || "free");
  $("arm-holder").dataset.holder = g.holder || "";
  const list = $("refusals");
  list.replaceChildren();
  for (const r of (g.last_refusals || []).slice().reverse()) {
    list.append(el("li", { "data-kind": r.kind, "data-source": r.source },
      el("span", { class: "tool" }, r.kind + " " + r.source), " ",
      r.joint ? el("span", { class: "muted" }, r.joint + " ") : null, r.reason || ""));
  }
  if (!list.children.length) list.append(el("li", { class: "empty muted" }, "none refused"));
}

function renderRobot(r) {
  const el = $("robot");
  if (!r || r.name === "simulator") {
    el.textContent = "simulator";
    el.dataset.ready = "sim";
    return;
  }
  const worst = Object.entries(r.worst_mm || {}).map(([c, mm]) => `${c} ${mm} mm`).join(", ");
  el.dataset.ready = r.ready ? "true" : "false";
  el.textContent = r.ready ? `robot ready (${worst})`
    : (r.missing_steps && r.missing_steps.length ? `robot not ready: ${r.missing_steps.join(", ")} to do`
      : `robot not ready${worst ? ` (${worst}; over ${r.threshold_mm} mm)` : ""}`);
  el.title = r.checked_at ? `pointing check of ${r.checked_at}` : "no pointing check yet";
}

// ---- cameras ----------------------------------------------------------------------------
function camId(topic) { return "cam-" + topic.replace(/[^A-Za-z0-9_-]/g, "_"); }

function ensureCameras(topics) {
  const box = $("cameras");
  for (const topic of topics) {
    if (topic === "agent/view" || document.getElementById(camId(topic))) continue;
    box.append(el("figure", {}, el("img", { id: camId(topic), alt: topic, "data-topic": topic }),
                  el("figcaption", {}, topic)));
  }
}

function imgFor(topic) { return topic === "agent/view" ? $("view") : $(camId(topic)); }

function loadFrame(topic) {
  const img = imgFor(topic);
  if (!img) return;
  const seq = S.want[topic];
  S.loading[topic] = true;
  const done = (ok) => {
    S.loading[topic] = false;
    if (ok) {
      S.shown[topic] = seq;
      img.dataset.seq = seq;
      if (topic === "agent/view") $("view-empty").hidden = true;
    }
    if (S.want[topic] > (S.shown[topic] || 0) && ok) loadFrame(topic);
  };
  img.onload = () => done(true);
  img.onerror = () => done(false);
  img.src = "/frame?topic=" + encodeURIComponent(topic) + "&seq=" + seq;
}

function onFrame(topic, seq) {
  if (topic !== "agent/view") ensureCameras([topic]);
  S.want[topic] = seq;
  if (!S.loading[topic]) loadFrame(topic);
}

// ---- the stream -------------------------------------------------------------------------
function handle(m) {
  switch (m.type) {
    case "hello":
      S.client = m.client;
      S.token = m.token;
      document.body.dataset.client = m.client;
      break;
    case "state":
      S.state = m.state;
      S.operator = m.operator;
      renderState();
      break;
    case "events":
      $("events").replaceChildren();
      for (const ev of m.events || []) addEvent(ev);
      break;
    case "event":
      addEvent(m.event);
      if (m.event.kind === "operator_takeover") {
        S.operator = { action: (m.event.text || "").replace(/^operator (took over: )?/, ""), detail: {} };
        renderTakeover();
      }
      break;
    case "verdict": {
      const v = m.verdict;
      for (const a of (S.state && S.state.actions) || []) {
        if (a.action_id !== v.action_id) continue;
        a.verdicts = (a.verdicts || []).filter((x) => x.question !== v.question).concat([v]);
      }
      renderState();
      break;
    }
    case "operator":
      S.operator = m.operator;
      renderTakeover();
      break;
    case "tick":
      for (const [id, s] of Object.entries(m.elapsed || {})) {
        for (const e of document.querySelectorAll('.elapsed[data-action="' + id + '"]'))
          e.textContent = Number(s).toFixed(1) + " s";
        for (const a of (S.state && S.state.actions) || [])
          if (a.action_id === id) a.elapsed_s = s;
      }
      break;
    case "lock":
      S.holder = m.holder;
      renderLock();
      if (!m.holder && S.client) post("/api/lock", {}, true);
      break;
    case "estop":
      S.estop = m.estop || S.estop;
      renderEstop();
      break;
    case "robot":
      renderRobot(m.robot);
      break;
    case "gate":
      renderGate(m.gate || {});
      break;
    case "cameras":
      ensureCameras(m.topics || []);
      break;
    case "frame":
      onFrame(m.topic, m.seq);
      break;
    case "dropped":
      $("dropped").textContent = "(" + m.count + " updates dropped; resynced)";
      break;
  }
}

function connect() {
  const es = new EventSource("/events");
  es.onopen = () => { $("conn").dataset.ok = "true"; };
  es.onerror = () => {
    $("conn").dataset.ok = "false"; S.client = null; S.token = null; renderLock();
  };
  es.onmessage = (e) => {
    try { handle(JSON.parse(e.data)); } catch (err) { console.error("panel message", err); }
  };
}

// ---- commands ---------------------------------------------------------------------------
$("form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  if (!text) return;
  const word = text.split(" ")[0];
  let r;
  if (word === "/cancel") r = await post("/api/cancel", {});
  else if (word === "/estop") r = await estop(text.slice(word.length).trim());
  else if (word === "/estop-reset") r = await estopReset();
  else if (word === "/pause") r = await post("/api/pause", {});
  else if (word === "/resume") r = await post("/api/resume", {});
  else if (word === "/takeover") r = await post("/api/takeover",
                                                { note: text.slice(word.length).trim() });
  else r = await post("/api/message", { text });
  if (r.ok) input.value = "";
});

// a safety command: any viewer, lock or not, even with the event stream down
async function estop(reason) {
  const r = await post("/api/estop", reason ? { reason } : {});
  if (r.unavailable) {
    S.estop = Object.assign({}, S.estop, { available: false });
    renderEstop();
  } else if (r.ok) {
    notice(r.message || "e-stop latched");
  }
  return r;
}
async function estopReset() {
  const r = await post("/api/estop_reset", {});
  if (r.ok) notice(r.message || "e-stop released");
  return r;
}
$("estop").addEventListener("click", () => estop(""));
$("estop-reset").addEventListener("click", () => estopReset());
$("cancel").addEventListener("click", () => post("/api/cancel", {}));
$("pause").addEventListener("click", () => post("/api/pause", {}));
$("resume").addEventListener("click", () => post("/api/resume", {}));
$("resume-banner").addEventListener("click", () => post("/api/resume", {}));
$("takeover-btn").addEventListener("click", async () => {
  const note = $("input").disabled ? "" : $("input").value.trim();
  const r = await post("/api/takeover", note ? { note } : {});
  if (r.ok && note) $("input").value = "";
});
$("show-internal").addEventListener("change", (e) => {
  $("events").dataset.internal = e.target.checked ? "shown" : "hidden";
});
$("reset").addEventListener("click", () => post("/api/reset", {}));
$("take").addEventListener("click", () => post("/api/lock", {}));

renderLock();
renderEstop();
connect();
