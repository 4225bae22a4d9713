// hilbert web's page: renders the server's page data (GET /api/view, then every change over the SSE
// stream /api/events) and sends the person's actions (POST /api/send, /api/stop, /api/approve).
// Every string comes from the run's log and is untrusted: it reaches the page through textContent and
// SVG text nodes only, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
let selected = null;
let transcriptAfter = 0;
let fetching = false;
let latest = null;

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function row(cells) {
  const tr = el("tr");
  for (const cell of cells) tr.appendChild(el("td", cell));
  return tr;
}

const money = (usd) => "$" + Number(usd).toFixed(4);
const count = (n) => Number(n).toLocaleString("en-US");

function render(data) {
  latest = data;
  $("run").textContent = data.run;
  $("run-state").textContent = data.state;
  $("goal").textContent = data.goal ? "goal: " + data.goal : "";
  const s = data.summary;
  const statuses = Object.entries(s.statuses).map(([k, n]) => n + " " + k.replace("_", " ")).join(", ");
  const tasks = data.climb ? "" : s.tasks + " tasks (" + (statuses || "none yet") + ") — ";  // a climb has tries
  $("plan-section").hidden = $("funnel-section").hidden = Boolean(data.climb);
  $("headline").textContent =
    tasks + money(s.cost_usd) + (s.unpriced ? " + $?" : "") +
    " — " + count(s.tokens.total) + " tokens (" + count(s.tokens.cache_read) + " cache reads) — " +
    Math.round(s.duration_s) + "s";
  renderAgents(data.agents);
  renderPlan(data.plan);
  renderSpend(data.spend, data.by_agent);
  renderFunnel(data.funnel, data.reasons, data.retries);
  renderQueue(data.queue);
  renderBudgets(data.budgets, data.proposals, data.waiting);
  renderGovernor(data.governor);
  renderClimb(data.climb);
  followTranscript();
}

// A climb's progress: each measured try's median by try number (kept filled, others hollow, coloured by
// what became of them), the best as a step line from the base, the band an improvement must clear. The
// y range is the server's (p.low..p.high: the climb's own); a try far off it sits on the edge, its
// value in its label.
function renderClimb(climb) {
  $("climb-section").hidden = !climb;
  if (!climb) return;
  $("leaderboard").textContent = climb.leaderboard.join("\n");
  const chart = $("climb-plot");
  const W = 560, H = 200, L = 50, T = 20;
  chart.setAttribute("viewBox", "0 0 " + (W + L + 10) + " " + (H + T + 30));
  const p = climb.progress;
  if (!p) {
    chart.replaceChildren(svgEl("text", { x: 10, y: 14 }, "(the base is not measured yet)"));
    return;
  }
  const low = p.low, high = p.high, span = Math.max(high - low, 1e-12);
  const x = (n) => (L + (n / Math.max(p.last, 1)) * W).toFixed(1);
  const y = (v) => (T + H - ((Math.min(Math.max(v, low), high) - low) / span) * H).toFixed(1);
  const parts = [
    svgEl("rect", { x: L, y: y(p.base + p.band), width: W, height: Math.max(Number(y(p.base - p.band)) - Number(y(p.base + p.band)), 1), class: "noise-band" }),
    svgEl("line", { x1: L, y1: T + H, x2: L + W, y2: T + H, class: "axis" }),
    svgEl("polyline", { points: p.best.map((c) => x(c[0]) + "," + y(c[1])).join(" "), class: "best-line" }),
    svgEl("text", { x: 0, y: Number(y(high)) + 4 }, high.toPrecision(3)),
    svgEl("text", { x: 0, y: Number(y(low)) + 4 }, low.toPrecision(3)),
    svgEl("text", { x: L, y: 12 }, p.unit + " by try (best: line; band: what a gain must clear)"),
    svgEl("text", { x: L + W - 40, y: T + H + 16 }, "try " + (p.last - 1)),
  ];
  for (const q of p.points) {
    const dot = svgEl("circle", { cx: x(q.try), cy: y(q.median), r: 4, stroke: q.colour, fill: q.stage === "kept" ? q.colour : "none", "data-stage": q.stage });
    dot.appendChild(svgEl("title", {}, "try " + q.try + ": " + q.median.toPrecision(4) + " (" + q.stage + ")"));
    parts.push(dot);
    if (q.median > high || q.median < low) {  // off the range: drawn on its edge, labelled
      parts.push(svgEl("text", { x: Number(x(q.try)) + 6, y: Number(y(q.median)) + 4 }, (q.median > high ? "↑ " : "↓ ") + q.median.toPrecision(3)));
    }
  }
  chart.replaceChildren(...parts);
}

function renderAgents(agents) {
  const body = $("agents").tBodies[0];
  body.replaceChildren(...agents.map((a) => {
    const tr = row([a.name, a.task, a.state, a.turns, count(a.tokens), a.cost, a.last_event]);
    tr.dataset.agent = a.name;
    if (a.name === selected) tr.classList.add("selected");
    tr.addEventListener("click", () => select(a.name));
    return tr;
  }));
  $("agents-empty").hidden = agents.length > 0;
  if (selected === null && agents.length) select(agents[0].name);
}

function select(agent) {
  if (agent === selected) return;
  selected = agent;
  transcriptAfter = 0;
  $("transcript").replaceChildren();
  $("transcript-agent").textContent = agent;
  $("send-to").textContent = agent;
  for (const tr of $("agents").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.agent === agent);
  followTranscript();
}

async function followTranscript() {
  if (selected === null || fetching) return;
  fetching = true;
  const agent = selected;
  try {
    for (;;) {
      const answer = await fetch("/api/transcript?" + new URLSearchParams({ agent, after: transcriptAfter }));
      if (!answer.ok) return;
      const got = await answer.json();
      if (agent !== selected) break; // chosen another meanwhile: these lines are not its
      const pre = $("transcript");
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      for (const [, line] of got.lines) pre.appendChild(document.createTextNode(line + "\n"));
      if (atEnd) pre.scrollTop = pre.scrollHeight;
      transcriptAfter = got.last;
      if (!got.lines.length) return;
    }
  } finally {
    fetching = false;
  }
  followTranscript(); // the agent chosen while this one's lines were on their way: its select() found us busy
}

function renderPlan(plan) {
  const graph = $("plan");
  $("plan-empty").hidden = plan.nodes.length > 0;
  const W = 170, H = 54, GAP_X = 50, GAP_Y = 14;
  const at = {};
  for (const n of plan.nodes) at[n.id] = { x: 10 + n.col * (W + GAP_X), y: 10 + n.row * (H + GAP_Y) };
  const width = Math.max(200, ...plan.nodes.map((n) => at[n.id].x + W + 10));
  const height = Math.max(40, ...plan.nodes.map((n) => at[n.id].y + H + 10));
  graph.setAttribute("viewBox", "0 0 " + width + " " + height);
  graph.setAttribute("height", height);
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" });
  marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8993a0" }));
  defs.appendChild(marker);
  const parts = [defs];
  for (const [from, to] of plan.edges) {
    const a = at[from], b = at[to];
    const d = "M" + (a.x + W) + "," + (a.y + H / 2) + " C" + (a.x + W + GAP_X / 2) + "," + (a.y + H / 2) + " " +
      (b.x - GAP_X / 2) + "," + (b.y + H / 2) + " " + b.x + "," + (b.y + H / 2);
    parts.push(svgEl("path", { d, class: "edge", "marker-end": "url(#arrow)" }));
  }
  for (const n of plan.nodes) {
    const g = svgEl("g", { class: "node", "data-task": n.id, "data-status": n.status, transform: "translate(" + at[n.id].x + "," + at[n.id].y + ")" });
    g.appendChild(svgEl("rect", { width: W, height: H, rx: 6 }));
    g.appendChild(svgEl("text", { x: 8, y: 16, "font-weight": "bold" }, n.id + " · " + n.status.replace("_", " ")));
    g.appendChild(svgEl("text", { x: 8, y: 32 }, n.title.length > 26 ? n.title.slice(0, 25) + "…" : n.title));
    g.appendChild(svgEl("text", { x: 8, y: 47 }, n.worker));
    g.appendChild(svgEl("title", {}, n.id + ": " + n.title));
    parts.push(g);
  }
  graph.replaceChildren(...parts);
}

function renderSpend(points, byAgent) {
  const chart = $("spend");
  const W = 560, H = 180, L = 10, T = 20;
  chart.setAttribute("viewBox", "0 0 " + (W + 2 * L) + " " + (H + T + 20));
  const parts = [svgEl("line", { x1: L, y1: T + H, x2: L + W, y2: T + H, class: "axis" })];
  if (points.length) {
    const t0 = points[0].time, span = Math.max(points[points.length - 1].time - t0, 1e-9);
    const last = points[points.length - 1];
    const maxCost = Math.max(last.cost_usd, 1e-9), maxTokens = Math.max(last.tokens.total, 1);
    const line = (value) => points.map((p) => (L + ((p.time - t0) / span) * W).toFixed(1) + "," + (T + H - value(p) * H).toFixed(1)).join(" ");
    parts.push(svgEl("polyline", { points: line((p) => p.tokens.total / maxTokens), class: "tokens-line" }));
    parts.push(svgEl("polyline", { points: line((p) => p.cost_usd / maxCost), class: "cost-line" }));
    parts.push(svgEl("text", { x: L, y: 12, fill: "#c0392b" }, "cost " + money(last.cost_usd)));
    parts.push(svgEl("text", { x: L + 160, y: 12, fill: "#2e6fd8" }, "tokens " + count(last.tokens.total)));
    parts.push(svgEl("text", { x: L + W - 60, y: T + H + 16 }, Math.round(span) + "s"));
  } else {
    parts.push(svgEl("text", { x: L, y: 12 }, "(nothing spent yet)"));
  }
  chart.replaceChildren(...parts);
  $("by-agent").tBodies[0].replaceChildren(...byAgent.map((a) => row([a.agent, money(a.cost_usd), count(a.tokens.total), a.turns])));
}

function renderFunnel(f, reasons, retries) {
  const steps = [
    ["claimed", f.claimed], ["sent back", f.sent_back], ["done", f.done], ["merged", f.merged],
    ["conflicts", f.conflicts], ["rejected", f.rejected],
  ];
  const top = Math.max(1, ...steps.map(([, n]) => n));
  $("funnel").replaceChildren(...steps.map(([label, n]) => {
    const line = el("div", null, "funnel-row");
    line.dataset.step = label;
    line.appendChild(el("span", label, "label"));
    const bar = el("span", null, "bar");
    bar.style.width = (n / top) * 60 + "%";
    line.appendChild(bar);
    line.appendChild(el("span", n, "count"));
    return line;
  }));
  $("reasons").tBodies[0].replaceChildren(...reasons.map((r) => row([r.source, r.reason, r.count, r.tasks.join(", "), r.example])));
  $("retries").replaceChildren(...retries.map((r) => el("li", r.task + " " + r.kind + ": " + r.decision + (r.why ? " — " + r.why : ""))));
}

function renderQueue(q) {
  $("queue-waiting").textContent =
    "waiting to merge: " + (q.waiting.join(", ") || "none") + " · held for you: " + (q.held.join(", ") || "none");
  $("batches").tBodies[0].replaceChildren(...q.batches.map((b) => row([
    b.number, b.tasks.join(", "), b.checks_passed + " passed, " + b.checks_failed + " failed" + (b.flaky ? ", " + b.flaky + " flaky" : ""),
    b.bisections, b.merged.join(", "), b.conflicts.join(", "), b.rejected.join(", "), b.requeued.join(", "),
  ])));
}

function renderBudgets(budgets, proposals, waiting) {
  $("budgets").replaceChildren(...(budgets.length ? budgets : ["(no budget set in this run)"]).map((line) => el("li", line)));
  $("proposals").replaceChildren(...proposals.map((line) => el("li", line)));
  $("approvals").replaceChildren(...waiting.map((id) => {
    const button = el("button", "approve " + id);
    button.type = "button";
    button.dataset.approve = id;
    button.addEventListener("click", () => act("/api/approve", { proposal: id }));
    return button;
  }));
}

function renderGovernor(lines) {
  const shown = lines.length ? lines : ["(no call of this run's models went through this machine's rate-limit governor)"];
  $("governor").replaceChildren(...shown.map((line) => el("li", line)));
}

async function act(path, body) {
  const answer = await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  let said;
  try {
    const got = await answer.json();
    said = got.said || got.error;
  } catch (_) {
    said = "refused (" + answer.status + ")";
  }
  $("notice").textContent = said;
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("view", (event) => render(JSON.parse(event.data)));
  source.addEventListener("open", () => { $("live").textContent = "connected"; $("live").className = "pill on"; });
  source.addEventListener("error", () => { $("live").textContent = "disconnected, retrying"; $("live").className = "pill off"; });
}

document.addEventListener("DOMContentLoaded", () => {
  $("send-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("send-text").value.trim();
    if (selected === null || !text) return;
    act("/api/send", { agent: selected, text }).then(() => { $("send-text").value = ""; });
  });
  $("stop-agent").addEventListener("click", () => {
    if (selected !== null && confirm("stop " + selected + "? (its work is kept)")) act("/api/stop", { agent: selected });
  });
  $("stop-run").addEventListener("click", () => {
    if (latest && confirm("stop the whole run " + latest.run + "? (every agent; work is kept)")) act("/api/stop", { agent: null });
  });
  connect();
});
