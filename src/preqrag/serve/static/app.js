// preqrag serve: the page. Plain JS, no build step. Every piece of server data is put in
// the DOM with textContent / text nodes (never innerHTML), so passage text such as
// "<script>" or "<img onerror=...>" is shown as text and runs nothing.
"use strict";

const $ = (id) => document.getElementById(id);
const RANKING_STAGES = [
  ["sparse", "BM25 (sparse)"], ["dense", "dense"], ["merged", "fusion (merged)"],
  ["reranked", "cross-encoder (reranked)"], ["final", "final (given to the generator)"],
];
const TIME_ORDER = ["classify", "rewrite", "sparse", "dense", "fusion", "rerank", "generate"];

// el("td", {class: "num"}, "text", childNode, ...): attributes via setAttribute, children as text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function getJSON(path) {
  const r = await fetch(path, { headers: headers() });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return { status: r.status, body };
}

async function postJSON(path, payload) {
  const r = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(payload) });
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: "bad_response", message: "HTTP " + r.status }; }
  return { status: r.status, body };
}

function showError(message) {
  const box = $("error");
  box.textContent = message || "";
  box.hidden = !message;
}

function setStatus(state, text) {
  const s = $("status");
  s.dataset.state = state;
  s.textContent = text;
}

// ------------------------------------------------------------------ start-up
let CONFIG = null;

async function pollHealth() {
  for (;;) {
    try {
      const { status, body } = await getJSON("/healthz");
      if (status === 200) { setStatus("ready", "ready"); return; }
      if (body && body.state === "failed") { setStatus("error", body.message); return; }
      setStatus("loading", (body && body.message) || "loading models…");
    } catch (e) {
      setStatus("error", "server unreachable");
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function loadConfig() {
  const { status, body } = await getJSON("/v1/config");
  if (status === 401) {
    $("key-box").open = true;
    showError("This server requires an API key: enter it under “API key”, then submit.");
    return;
  }
  if (status !== 200) { showError((body && body.message) || "cannot read /v1/config"); return; }
  CONFIG = body;
  const names = Object.keys(body.pipelines);
  for (const sel of [$("pipeline-a"), $("pipeline-b")]) {
    sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  }
  if (names.length > 1) $("pipeline-b").value = names[1];
  $("question").maxLength = body.limits.max_question_chars;
  if (body.examples && body.examples.length) {
    $("examples").append(...body.examples.map((q) => el("option", { value: q }, q)));
    $("examples-box").hidden = false;
  }
  showError("");
}

// ------------------------------------------------------------------ rendering
function fmtScore(x) { return typeof x === "number" ? x.toFixed(4) : ""; }
function fmtSec(x) { return typeof x === "number" ? (x * 1000).toFixed(1) + " ms" : ""; }

function docOf(res, pid) {
  if (res.doc_ids && res.doc_ids[pid]) return res.doc_ids[pid];
  const i = pid.lastIndexOf("#");
  return i > 0 ? pid.slice(0, i) : pid;
}

function goldBadge(isGold) { return isGold ? el("span", { class: "gold-badge", title: "gold document" }, "gold") : null; }

function section(stage, title, open, ...content) {
  return el("details", { class: "stage", "data-stage": stage, open }, el("summary", {}, title), ...content);
}

function kv(pairs) {
  const dl = el("dl", { class: "kv" });
  for (const [k, v] of pairs) { if (v !== null && v !== undefined && v !== "") dl.append(el("dt", {}, k), el("dd", {}, v)); }
  return dl;
}

function renderAnswer(res, gold) {
  const a = res.answer;
  const out = [el("h3", {}, "Answer"), el("div", { class: "answer-text", "data-testid": "answer" }, a.answer)];
  if (res.citations && res.citations.length) {
    const rows = res.citations.map((c) => el("tr", {}, el("td", {}, c.sentence),
      el("td", { class: "num" }, c.passages.map((n) => "[" + n + "]").join(" "))));
    out.push(el("table", { "data-testid": "citations" },
      el("thead", {}, el("tr", {}, el("th", {}, "sentence"), el("th", { class: "num" }, "cites passage"))),
      el("tbody", {}, rows)));
  } else {
    out.push(el("p", { class: "meta", "data-testid": "citations" }, "This answer cites no passage by number."));
  }
  out.push(renderPassages(a.passages, gold));
  return out;
}

function renderPassages(passages, gold, title) {
  const list = el("ol", { class: "passages", "data-testid": "passages" });
  for (const p of passages) {
    const isGold = p.doc_IDs.some((d) => gold.has(d));
    list.append(el("li", { class: isGold ? "gold" : null },
      el("div", { class: "passage-head" }, p.doc_IDs.join(", "), goldBadge(isGold)),
      el("div", { class: "passage-text" }, p.passage)));
  }
  return el("div", {}, el("h3", {}, title || "Passages"), list);
}

function renderRanking(res, ranking, gold) {
  const rows = ranking.ids.map((pid, i) => {
    const doc = docOf(res, pid);
    const isGold = gold.has(doc);
    return el("tr", { class: isGold ? "gold" : null },
      el("td", { class: "num" }, i + 1), el("td", { class: "id" }, pid), el("td", { class: "id" }, doc, goldBadge(isGold)),
      el("td", { class: "num" }, fmtScore(ranking.scores[i])));
  });
  if (!rows.length) return el("p", { class: "meta" }, "no candidates");
  return el("table", {},
    el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "passage"), el("th", {}, "document"),
      el("th", { class: "num" }, "score"))),
    el("tbody", {}, rows));
}

function renderTrace(res, gold) {
  const t = res.trace;
  const out = [el("h3", {}, "Trace")];
  const c = t.classification;
  let confidence = "n/a (this classifier gives no score)";
  if (typeof c.score === "number") confidence = (c.question_type === "multi" ? c.score : 1 - c.score).toFixed(3);
  out.push(section("classify", "1. classify: " + c.question_type, true, kv([
    ["class", c.question_type], ["classifier", c.classifier],
    ["confidence", confidence], ["P(multi)", typeof c.score === "number" ? c.score.toFixed(3) : null],
    ["fallback", c.fallback]])));

  const plan = t.plan;
  const subRows = plan.sub_queries.map((q, i) => el("tr", {}, el("td", { class: "num" }, i + 1),
    el("td", {}, q.text), el("td", {}, q.sparse), el("td", {}, q.dense)));
  const rewrite = section("rewrite", "2. rewrite (" + plan.rewriter + "): " + plan.sub_queries.length +
    (plan.question_type === "multi" ? " sub-question(s)" : " query"), true,
    el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "text"),
      el("th", {}, "sparse (BM25) query"), el("th", {}, "dense query"))), el("tbody", {}, subRows)));
  const llm = Object.entries(plan.llm_outputs || {});
  if (llm.length) {
    rewrite.append(el("details", {}, el("summary", {}, "raw LLM outputs"),
      kv(llm.map(([k, v]) => [k, v]))));
  }
  out.push(rewrite);

  const fallbacks = t.fallbacks || [];
  out.push(section("fallbacks", "fallbacks: " + (fallbacks.length ? fallbacks.length + " fired" : "none fired"), fallbacks.length > 0,
    fallbacks.length ? el("ul", {}, fallbacks.map((f) => el("li", { class: "fallback" }, f)))
      : el("p", { class: "meta" }, "every LLM output was accepted")));

  let n = 3;
  for (const [stage, title] of RANKING_STAGES) {
    const lists = (t.rankings || {})[stage];
    if (!lists) continue;
    const body = lists.map((r, i) => el("div", {},
      lists.length > 1 ? el("p", { class: "meta" }, "sub-query " + (i + 1) + ": " +
        (plan.sub_queries[i] ? plan.sub_queries[i].text : "")) : null,
      renderRanking(res, r, gold)));
    const count = lists.reduce((s, r) => s + r.ids.length, 0);
    out.push(section(stage, (n++) + ". " + title + ": " + count + " candidate(s)", stage === "final", body));
  }

  const secs = Object.assign({}, t.seconds || {});
  const order = TIME_ORDER.filter((s) => s in secs).concat(Object.keys(secs).filter((s) => !TIME_ORDER.includes(s)));
  const total = order.reduce((s, k) => s + secs[k], 0);
  out.push(section("timing", "time per stage: " + fmtSec(total), true,
    el("table", {}, el("tbody", {}, order.map((s) => el("tr", { "data-stage-time": s },
      el("td", {}, s), el("td", { class: "num" }, fmtSec(secs[s])))),
      el("tr", {}, el("th", {}, "total"), el("th", { class: "num" }, fmtSec(total))))),
    el("p", { class: "meta" }, "Batch time of each stage divided by the questions sharing the batch.")));
  if (t.truncations && t.truncations.length) {
    out.push(section("truncations", "truncations", true, el("ul", {}, t.truncations.map((x) => el("li", {}, x)))));
  }
  return out;
}

function renderColumn(name, op, status, res) {
  const col = el("section", { class: "column", "data-pipeline": name });
  const gold = new Set((res && res.gold_doc_ids) || []);
  col.append(el("h2", {}, name));
  if (res && res.served) {
    col.append(el("p", { class: "meta" }, "answered in " + res.served.run_s.toFixed(2) + " s (micro-batch of " +
      res.served.batch_size + ", queued " + res.served.queued_s.toFixed(2) + " s)"));
  }
  if (gold.size) col.append(el("p", { class: "meta" }, "gold documents: ", [...gold].join(", ")));
  if (status !== 200) {
    col.append(el("p", { class: "failure", "data-testid": "failure" },
      (res && res.error) || "error", ": ", (res && res.message) || "HTTP " + status,
      res && res.stage ? " (stage " + res.stage + ")" : ""));
  } else if (op === "answer" && res.answer) {
    col.append(...renderAnswer(res, gold));
  } else if (op === "retrieve") {
    col.append(renderPassages(res.context || [], gold, "Passages the generator would get"));
  }
  if (res && res.trace) col.append(...renderTrace(res, gold));
  return col;
}

// ------------------------------------------------------------------ asking
async function ask(op) {
  const question = $("question").value.trim();
  if (!question) { showError("Type a question first."); return; }
  showError("");
  if (!CONFIG) await loadConfig();
  const names = [$("pipeline-a").value || undefined];
  if ($("compare").checked && $("pipeline-b").value) names.push($("pipeline-b").value);
  const results = $("results");
  results.style.setProperty("--cols", String(names.length));
  results.replaceChildren(...names.map((n) => el("section", { class: "column pending" }, el("h2", {}, n || ""),
    el("p", { class: "meta" }, "working…"))));
  results.setAttribute("aria-busy", "true");
  for (const b of [$("submit"), $("retrieve")]) b.disabled = true;
  try {
    const path = op === "answer" ? "/v1/answer" : "/v1/retrieve";
    const replies = await Promise.all(names.map((n) => postJSON(path, { question, pipeline: n || null })));
    results.replaceChildren(...replies.map((r, i) => renderColumn((r.body && r.body.pipeline) || names[i] || "",
      op, r.status, r.body)));
    const failed = replies.find((r) => r.status === 401 || r.status === 429 || r.status === 503);
    if (failed) showError(failed.body.message + (failed.status === 429 ? " (try again shortly)" : ""));
  } catch (e) {
    showError("request failed: " + e);
    results.replaceChildren();
  } finally {
    results.removeAttribute("aria-busy");
    results.dataset.done = String(Date.now());
    for (const b of [$("submit"), $("retrieve")]) b.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", (e) => { e.preventDefault(); ask("answer"); });
  $("retrieve").addEventListener("click", () => ask("retrieve"));
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); ask("answer"); }
  });
  $("examples").addEventListener("change", (e) => { if (e.target.value) $("question").value = e.target.value; });
  $("api-key").addEventListener("change", () => { CONFIG = null; loadConfig(); });
  pollHealth();
  loadConfig();
});
