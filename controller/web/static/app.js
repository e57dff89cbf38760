// The live view: fetches /api/view (once a second while the run is live) and renders it.
// Plain DOM + plotly.js (served by the controller, no CDN).
"use strict";

const token = new URLSearchParams(location.search).get("token");
const api = "api/view" + (token ? "?token=" + encodeURIComponent(token) : "");
const POLL_MS = 500;   // the view changes once per controller tick; half a tick's lag at most
let last = null;

function pct(x, digits = 1) { return x == null ? "–" : (100 * x).toFixed(digits) + " %"; }
function rate(bps) {
  if (bps == null) return "–";
  const u = [[1e9, "Gbit/s"], [1e6, "Mbit/s"], [1e3, "kbit/s"]];
  for (const [d, n] of u) if (bps >= d) return (bps / d).toFixed(1) + " " + n;
  return bps.toFixed(0) + " bit/s";
}
function when(t) { return t == null ? "" : new Date(t * 1000).toLocaleTimeString(); }
function cell(tr, text) { const td = document.createElement("td"); td.textContent = text; tr.appendChild(td); return td; }

// 0 (healthy) .. 1 (bad) for one link direction in the chosen metric
// a live page colours loss by the last two loss-map bins with packets; a recorded run by its window
function lossNow(d, live) { return d.recent_loss_rate ?? (live ? null : d.loss_rate); }
function severity(d, metric, lossRed, live) {
  const util = d.utilisation == null ? 0 : Math.min(1, d.utilisation);
  const queue = d.qlen_pkts == null || !d.queue_limit_pkts ? 0 : Math.min(1, d.qlen_pkts / d.queue_limit_pkts);
  const l = lossNow(d, live);
  const loss = l == null ? 0 : Math.min(1, l / lossRed);
  if (metric === "utilisation") return util;
  if (metric === "queue") return queue;
  if (metric === "loss") return loss;
  // a busy link is amber, not a fault: red is loss above the alert's threshold or a full queue
  return Math.max(util * 0.7, queue >= 0.9 ? 1 : queue * 0.8, loss);
}
function health(s) { return s >= 0.999 ? "red" : s >= 0.4 ? "amber" : "green"; }
function colour(s) {
  // green -> amber -> red
  const a = [26, 127, 55], b = [212, 167, 44], c = [207, 34, 46];
  const [p, q, t] = s < 0.5 ? [a, b, s * 2] : [b, c, (s - 0.5) * 2];
  return `rgb(${p.map((v, i) => Math.round(v + (q[i] - v) * t)).join(",")})`;
}

function lossRedThreshold(v) {
  const r = (v.alerts.rules || []).find(r => r.kind === "link_loss");
  return r && r.above > 0 ? r.above : 0.01;
}

function drawGraph(v, metric) {
  const pos = Object.fromEntries(v.nodes.map(n => [n.name, n]));
  const lossRed = lossRedThreshold(v);
  const traces = [];
  for (const d of v.directions) {
    const a = pos[d.src], b = pos[d.dst];
    if (!a || !b) continue;
    // each direction on its own side of the segment
    const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
    const ox = -dy / len * 0.06, oy = dx / len * 0.06;
    const s = severity(d, metric, lossRed, v.live);
    const tip = `${d.name}<br>utilisation ${pct(d.utilisation)}<br>queue ${d.qlen_pkts ?? "–"} pkts` +
      `<br>loss now ${pct(d.recent_loss_rate, 2)}, window ${pct(d.loss_rate, 3)}`;
    traces.push({x: [a.x + ox, b.x + ox], y: [a.y + oy, b.y + oy], mode: "lines", hoverinfo: "text",
      text: [d.avoided ? tip + "<br>routed around (mitigation)" : tip, tip],
      line: {color: colour(s), width: d.role === "host" ? 2 : 4, dash: d.avoided ? "dot" : "solid"},
      showlegend: false, name: d.name});
  }
  traces.push({x: v.nodes.map(n => n.x), y: v.nodes.map(n => n.y), mode: "markers+text",
    text: v.nodes.map(n => n.name), textposition: "top center", hoverinfo: "text",
    hovertext: v.nodes.map(n => `${n.name} (${n.role}${n.ip ? ", " + n.ip : ""})`),
    marker: {size: v.nodes.map(n => n.kind === "host" ? 10 : 16),
             symbol: v.nodes.map(n => n.kind === "host" ? "circle" : "square"), color: "#24292f"},
    showlegend: false});
  const layout = {margin: {l: 10, r: 10, t: 10, b: 10}, xaxis: {visible: false}, yaxis: {visible: false},
    hovermode: "closest", plot_bgcolor: "#fff", paper_bgcolor: "#fff"};
  Plotly.react("graph", traces, layout, {displayModeBar: false, responsive: true});
}

function fillTable(id, rows, build) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map(r => { const tr = document.createElement("tr"); build(tr, r); return tr; }));
}

function render(v) {
  const metric = document.getElementById("metric").value;
  document.getElementById("topology").textContent = `· ${v.topology}` + (v.live ? "" : " (recorded run)");
  const age = v.updated_unix_s ? (Date.now() / 1000 - v.updated_unix_s) : null;
  const st = document.getElementById("status");
  const stale = v.live && v.running && age != null && age > 5;
  st.dataset.state = stale ? "stale" : v.live && v.running ? "live" : "recorded";
  st.textContent = (v.live && v.running ? "live" : v.live ? "controller stopped" : "recorded") +
    (v.updated_unix_s ? `, updated ${when(v.updated_unix_s)}` : "") + (stale ? " (stale)" : "");
  drawGraph(v, metric);
  const lossRed = lossRedThreshold(v);
  fillTable("links", v.directions.filter(d => d.role !== "host" || d.utilisation != null), (tr, d) => {
    tr.dataset.link = d.name;
    tr.dataset.health = health(severity(d, "health", lossRed, v.live));
    cell(tr, d.name); cell(tr, d.role); cell(tr, pct(d.utilisation));
    cell(tr, d.qlen_pkts == null ? "–" : `${d.qlen_pkts} / ${d.queue_limit_pkts ?? "?"}`);
    cell(tr, pct(d.recent_loss_rate, 2)); cell(tr, pct(d.loss_rate, 3));
    cell(tr, d.loss_ci95 ? `${pct(d.loss_ci95[0], 3)} – ${pct(d.loss_ci95[1], 3)}` : "–");
    cell(tr, d.lost ?? "–");
    tr.dataset.avoided = d.avoided ? "1" : "0";
    cell(tr, d.avoided ? "routed around" : "");
  });
  renderMitigation(v.mitigation);
  fillTable("flows", v.flows, (tr, f) => {
    tr.dataset.flow = `${f.src}>${f.dst}/${f.qp}`;
    cell(tr, `${f.src} → ${f.dst} qp ${f.qp}`); cell(tr, (f.path || []).join(" › "));
    cell(tr, rate(f.rate_bps)); cell(tr, f.fec ? `(${f.fec[0]}, ${f.fec[1]})` : "–");  // "–": the controller set none (senders may choose their own)
    cell(tr, f.samples); cell(tr, f.lost);
  });
  const alerts = [...v.alerts.active, ...v.alerts.resolved];
  fillTable("alerts", alerts, (tr, a) => {
    tr.dataset.state = a.state; tr.dataset.rule = a.rule; tr.dataset.subject = a.subject;
    cell(tr, a.state); cell(tr, a.rule); cell(tr, a.subject);
    cell(tr, a.kind === "link_loss" ? pct(a.value, 2) : Number(a.value).toPrecision(3));
    cell(tr, a.kind === "link_loss" ? pct(a.threshold, 2) : a.threshold);
    cell(tr, when(a.fired_unix_s ?? a.since_unix_s)); cell(tr, when(a.resolved_unix_s));
  });
  const lm = v.lossmap;
  if (lm && lm.links.length) {
    const z = lm.lost.map((row, i) => row.map((l, j) => {
      const n = l + lm.delivered[i][j]; return n > 0 ? 100 * l / n : null; }));
    const x = lm.lost[0].map((_, j) => new Date((lm.start_unix_s + j * lm.bin_s) * 1000));
    Plotly.react("heatmap", [{z, x, y: lm.links, type: "heatmap", colorscale: "YlOrRd", reversescale: true, zmin: 0,
      colorbar: {title: {text: "loss %"}}, hoverongaps: false}],
      {margin: {l: 110, r: 10, t: 10, b: 40}, yaxis: {automargin: true}},
      {displayModeBar: false, responsive: true});
  }
  const dg = document.getElementById("diagnosis");
  const culprits = (v.diagnosis && v.diagnosis.culprits) || [];
  if (culprits.length) {
    dg.replaceChildren(...culprits.slice(0, 5).map((c, i) => {
      const div = document.createElement("div");
      div.className = i === 0 ? "culprit top" : "culprit";
      const h = document.createElement("strong");
      h.textContent = `${i + 1}. ${c.type} ${c.component}: ${c.kind} (confidence ${c.confidence})`;
      const pre = document.createElement("pre");
      pre.textContent = JSON.stringify(c.evidence, null, 1);
      div.append(h, pre); return div;
    }));
  }
}

// the mitigation's actions, newest first, each with its reason and evidence (hover)
function renderMitigation(m) {
  const mode = document.getElementById("mitigation-mode");
  if (!m) {
    mode.textContent = "the controller runs without --mitigate";
    fillTable("mitigation", [], () => {});
    return;
  }
  const off = m.avoided.length ? m.avoided.join(", ") : "none";
  const fec = m.fec_links.length ? `; FEC raised on ${m.fec_links.join(", ")}` : "";
  const errs = Object.keys(m.errors || {}).length ? `; errors: ${Object.entries(m.errors).map(([k, e]) => `${k}: ${e}`).join("; ")}` : "";
  mode.textContent = `mode ${m.mode}; links kept off: ${off}${fec}${errs}`;
  fillTable("mitigation", m.actions, (tr, a) => {
    tr.dataset.verb = a.verb; tr.dataset.target = a.target; tr.dataset.outcome = a.outcome;
    cell(tr, when(a.at)); cell(tr, a.undoes != null ? `undo (of #${a.undoes})` : a.verb);
    cell(tr, a.target); cell(tr, a.kind ? `${a.kind} ${a.component ?? ""}` : "");
    const r = cell(tr, a.reason || ""); r.title = JSON.stringify(a.evidence || {});
    cell(tr, a.outcome || "");
  });
}

async function tick() {
  try {
    const r = await fetch(api, {cache: "no-store"});
    if (!r.ok) throw new Error((await r.json()).error || r.statusText);
    last = await r.json();
    render(last);
    document.body.dataset.ready = "1";
    if (last.live) setTimeout(tick, POLL_MS);
  } catch (e) {
    const st = document.getElementById("status");
    st.dataset.state = "error"; st.textContent = "cannot read the view: " + e.message;
    setTimeout(tick, 2 * POLL_MS);
  }
}
document.getElementById("metric").addEventListener("change", () => last && render(last));
tick();
