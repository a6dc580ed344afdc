// gflink's dashboard: one job's endpoint, read through Flink's REST API
// only (so the page reads a Flink cluster's job where the shapes agree).
// The token lives in sessionStorage: entered once per tab session, sent
// in the Authorization header, never in a URL. Text from the server is
// always set as text, never as HTML.
"use strict";

const TOKEN_KEY = "gflink.token";
const REFRESH_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
let jobId = null;
let timer = null;
const history = new Map(); // checkpoint id -> statistics, kept beyond the server's 10

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

class Unauthorized extends Error {}

async function api(path, opts = {}) {
  const headers = Object.assign({ "Accept": "application/json" }, opts.headers || {});
  const t = token();
  if (t) headers["Authorization"] = "Bearer " + t;
  const resp = await fetch(path, Object.assign({}, opts, { headers, cache: "no-store" }));
  if (resp.status === 401) throw new Unauthorized();
  const body = await resp.text();
  const data = body ? JSON.parse(body) : null;
  if (!resp.ok) {
    const msg = data && data.errors ? data.errors.join("; ") : resp.statusText;
    throw new Error(msg);
  }
  return data;
}

function el(tag, attrs = {}, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

function fmtRate(x) {
  if (x >= 1e6) return (x / 1e6).toFixed(1) + " M";
  if (x >= 1e3) return (x / 1e3).toFixed(1) + " k";
  return Math.round(x).toString();
}

function fmtBytes(n) {
  if (n < 1024) return n + " B";
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let i = -1;
  do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
  return n.toFixed(1) + " " + units[i];
}

function fmtDuration(ms) {
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60;
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + (s % 60) + "s";
}

function fmtWatermark(v) {
  const n = Number(v);
  if (!isFinite(n) || n <= -9.2e18) return "no watermark";
  if (n >= 9.2e18) return "end of input";
  return new Date(n).toISOString();
}

function showLogin(message) {
  clearTimeout(timer);
  timer = null;
  document.getElementById("job").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
}

async function refresh() {
  try {
    const overview = await api("/jobs/overview");
    if (!overview.jobs || overview.jobs.length === 0) return;
    // A Flink cluster lists many jobs: the one named in the page's
    // fragment (#<jobId>, never sent to the server), else a running one.
    // The job shown stays shown while it is listed.
    const jobs = overview.jobs;
    const pick = jobs.find((j) => j.jid === location.hash.slice(1)) || jobs.find((j) => encodeURIComponent(j.jid) === jobId) ||
      jobs.find((j) => j.state === "RUNNING") || jobs[0];
    jobId = encodeURIComponent(pick.jid);
    const [job, jobMetrics, cks] = await Promise.all([
      api(`/jobs/${jobId}`),
      api(`/jobs/${jobId}/metrics?get=uptime,numRestarts`),
      api(`/jobs/${jobId}/checkpoints`),
    ]);
    document.getElementById("login").hidden = true;
    document.getElementById("job").hidden = false;
    renderHeader(job, jobMetrics);
    await renderVertices(job);
    renderCheckpoints(cks);
  } catch (e) {
    if (e instanceof Unauthorized) {
      const had = token() !== "";
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(had ? "That token was refused." : "");
      return;
    }
    document.getElementById("action-result").textContent = "Could not refresh: " + e.message;
  }
}

function renderHeader(job, metrics) {
  document.getElementById("job-name").textContent = job.name + " (" + job.jid + ")";
  const st = document.getElementById("job-state");
  st.textContent = job.state;
  st.className = "state " + job.state;
  const m = Object.fromEntries(metrics.map((x) => [x.id, Number(x.value)]));
  document.getElementById("job-uptime").textContent = m.uptime > 0 ? "up " + fmtDuration(m.uptime) : "";
  document.getElementById("job-restarts").textContent = "restarts: " + (m.numRestarts || 0);
}

async function vertexMetrics(v) {
  const names = "numRecordsInPerSecond,numRecordsOutPerSecond,busyTimeMsPerSecond,currentInputWatermark";
  const [agg, bp] = await Promise.all([
    api(`/jobs/${jobId}/vertices/${encodeURIComponent(v.id)}/subtasks/metrics?get=${names}&agg=sum,max,min`),
    api(`/jobs/${jobId}/vertices/${encodeURIComponent(v.id)}/backpressure`),
  ]);
  const a = Object.fromEntries(agg.map((x) => [x.id, x]));
  const get = (name, k) => (a[name] && a[name][k] !== undefined ? a[name][k] : 0);
  return {
    in: get("numRecordsInPerSecond", "sum"),
    out: get("numRecordsOutPerSecond", "sum"),
    busy: get("busyTimeMsPerSecond", "max") / 10,
    watermark: a.currentInputWatermark ? a.currentInputWatermark.min : NaN,
    level: bp.backpressureLevel || "ok",
  };
}

async function renderVertices(job) {
  const stats = await Promise.all(job.vertices.map(vertexMetrics));
  const tbody = document.querySelector("#vertices tbody");
  tbody.replaceChildren(...job.vertices.map((v, i) => {
    const s = stats[i];
    return el("tr", { "data-vertex": v.id },
      el("td", {}, v.name), el("td", {}, String(v.parallelism)), el("td", {}, v.status),
      el("td", { "data-metric": "in", "data-value": String(s.in) }, fmtRate(s.in)),
      el("td", { "data-metric": "out", "data-value": String(s.out) }, fmtRate(s.out)),
      el("td", {}, s.busy.toFixed(0) + " %"),
      el("td", { class: "level-" + s.level, "data-metric": "backpressure" }, s.level),
      el("td", {}, fmtWatermark(s.watermark)));
  }));
  renderGraph(job, stats);
}

// renderGraph lays the vertices out in columns by their distance from
// the sources, edges from each input.
function renderGraph(job, stats) {
  const nodes = (job.plan && job.plan.nodes) || [];
  const level = new Map();
  const depth = (n, seen = new Set()) => {
    if (level.has(n.id)) return level.get(n.id);
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    let d = 0;
    for (const inp of n.inputs || []) {
      const from = nodes.find((x) => x.id === inp.id);
      if (from) d = Math.max(d, depth(from, seen) + 1);
    }
    level.set(n.id, d);
    return d;
  };
  nodes.forEach((n) => depth(n));
  const W = 240, H = 70, GX = 70, GY = 30;
  const rows = new Map(), pos = new Map();
  for (const n of nodes) {
    const l = level.get(n.id), r = rows.get(l) || 0;
    rows.set(l, r + 1);
    pos.set(n.id, { x: 10 + l * (W + GX), y: 10 + r * (H + GY) });
  }
  const cols = Math.max(1, ...[...level.values()].map((l) => l + 1));
  const maxRows = Math.max(1, ...rows.values());
  const svg = el("svg:svg", { width: cols * (W + GX), height: maxRows * (H + GY) + 10 });
  for (const n of nodes) {
    for (const inp of n.inputs || []) {
      const a = pos.get(inp.id), b = pos.get(n.id);
      if (!a || !b) continue;
      svg.append(el("svg:path", { class: "edge", d: `M${a.x + W},${a.y + H / 2} L${b.x},${b.y + H / 2}` }));
      svg.append(el("svg:text", { x: (a.x + W + b.x) / 2 - 20, y: (a.y + b.y) / 2 + H / 2 - 4 }, inp.ship_strategy || ""));
    }
  }
  job.vertices.forEach((v, i) => {
    const p = pos.get(v.id);
    if (!p) return;
    const s = stats[i];
    const name = v.name.length > 34 ? v.name.slice(0, 33) + "…" : v.name;
    svg.append(el("svg:g", { class: "vertex", "data-vertex": v.id },
      el("svg:title", {}, v.name),
      el("svg:rect", { x: p.x, y: p.y, width: W, height: H, rx: 4 }),
      el("svg:text", { x: p.x + 8, y: p.y + 18 }, name),
      el("svg:text", { x: p.x + 8, y: p.y + 36 }, `parallelism ${v.parallelism} · ${s.level} back pressure`),
      el("svg:text", { x: p.x + 8, y: p.y + 54 }, `in ${fmtRate(s.in)}/s · out ${fmtRate(s.out)}/s · busy ${s.busy.toFixed(0)} %`)));
  });
  document.getElementById("graph").replaceChildren(svg);
}

function renderCheckpoints(cks) {
  for (const c of cks.history || []) history.set(c.id, c);
  while (history.size > 60) history.delete(Math.min(...history.keys()));
  const list = [...history.values()].sort((a, b) => a.id - b.id);
  const counts = cks.counts || {};
  document.getElementById("ck-counts").textContent =
    `completed ${counts.completed || 0} · failed ${counts.failed || 0} · in progress ${counts.in_progress || 0}`;
  // The chart: a bar per checkpoint, its height the duration; a line for
  // the checkpointed size.
  const W = 12, H = 120, maxD = Math.max(1, ...list.map((c) => c.end_to_end_duration || 0));
  const maxS = Math.max(1, ...list.map((c) => c.checkpointed_size || 0));
  const svg = el("svg:svg", { width: Math.max(520, list.length * W + 20), height: H + 30 });
  let line = "";
  list.forEach((c, i) => {
    const d = c.end_to_end_duration || 0, h = Math.max(2, (d / maxD) * H);
    svg.append(el("svg:rect", { class: "ck " + c.status, "data-id": String(c.id), x: 10 + i * W, y: H - h + 5, width: W - 2, height: h },
      el("svg:title", {}, `#${c.id} ${c.status}: ${d} ms, ${fmtBytes(c.checkpointed_size || 0)}`)));
    line += (i ? " L" : "M") + (10 + i * W + W / 2) + "," + (H + 5 - ((c.checkpointed_size || 0) / maxS) * H);
  });
  if (line) svg.append(el("svg:path", { class: "size", d: line }));
  svg.append(el("svg:text", { x: 10, y: H + 25 }, `bars: duration (max ${maxD} ms) · line: size (max ${fmtBytes(maxS)})`));
  document.getElementById("ck-chart").replaceChildren(svg);
  const tbody = document.querySelector("#checkpoints tbody");
  tbody.replaceChildren(...list.slice().reverse().map((c) => el("tr", {},
    el("td", {}, String(c.id)), el("td", {}, c.status), el("td", {}, c.checkpoint_type || ""),
    el("td", {}, c.latest_ack_timestamp ? new Date(c.latest_ack_timestamp).toLocaleTimeString() : ""),
    el("td", {}, (c.end_to_end_duration || 0) + " ms"), el("td", {}, fmtBytes(c.checkpointed_size || 0)),
    el("td", { class: "path" }, c.external_path || ""))));
}

async function renderConfig() {
  const [jm, jc] = await Promise.all([api("/jobmanager/config"), api(`/jobs/${jobId}/config`)]);
  const rows = jm.map((e) => [e.key, e.value]);
  const uc = (jc && jc["execution-config"] && jc["execution-config"]["user-config"]) || {};
  for (const [k, v] of Object.entries(uc)) rows.push(["job argument " + k, String(v)]);
  document.querySelector("#config tbody").replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v))));
}

async function poll(kind, triggerId) {
  const deadline = Date.now() + 10 * 60 * 1000; // the server keeps results 5 min
  while (Date.now() < deadline) {
    const r = await api(`/jobs/${jobId}/${kind}/${encodeURIComponent(triggerId)}`);
    if (r.status && r.status.id === "COMPLETED") {
      if (r.operation && r.operation["failure-cause"]) {
        throw new Error(r.operation["failure-cause"]["stack-trace"] || "failed");
      }
      return r.operation;
    }
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error("no answer within 10 minutes; see gflink checkpoints");
}

async function act(what) {
  const out = document.getElementById("action-result");
  const dir = document.getElementById("sp-dir").value.trim();
  try {
    if (what === "cancel") {
      if (!confirm("Cancel job " + jobId + "?")) return;
      await api(`/jobs/${jobId}?mode=cancel`, { method: "PATCH" });
      out.textContent = "Job " + jobId + " is being cancelled.";
      return;
    }
    out.textContent = what === "stop" ? "Stopping with a savepoint…" : "Triggering a savepoint…";
    const body = what === "stop" ? { targetDirectory: dir || null, drain: false } : { "target-directory": dir || null, "cancel-job": false };
    const r = await api(`/jobs/${jobId}/${what === "stop" ? "stop" : "savepoints"}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const op = await poll("savepoints", r["request-id"]);
    out.textContent = "Savepoint completed. Path: " + op.location;
  } catch (e) {
    if (e instanceof Unauthorized) { showLogin(); return; }
    out.textContent = "Failed: " + e.message;
  }
}

// loop refreshes every REFRESH_MS after the previous refresh ended, so
// that slow answers never pile up.
async function loop() {
  await refresh();
  if (!document.getElementById("job").hidden) timer = setTimeout(loop, REFRESH_MS);
}

async function start() {
  clearTimeout(timer);
  await refresh();
  if (document.getElementById("job").hidden) return;
  renderConfig().catch(() => {});
  timer = setTimeout(loop, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    document.getElementById("token").value = "";
    start();
  });
  document.getElementById("savepoint").addEventListener("click", () => act("savepoint"));
  document.getElementById("stop").addEventListener("click", () => act("stop"));
  document.getElementById("cancel").addEventListener("click", () => act("cancel"));
  start(); // without a token first: an endpoint may not require one
});
