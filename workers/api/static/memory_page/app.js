// The memory page (记忆透明度): what the agent believes about one person, why and how sure, and the controls to
// correct it — in Chinese or English. It runs on the memory-page link's token (the URL fragment: no server sees
// it) against the API's own routes; the token opens this user's page and nothing else. Preact + htm and Chart.js,
// vendored (no CDN).
import { html, render, useEffect, useRef, useState } from "./vendor/preact-htm.module.js";

const token = new URLSearchParams(location.hash.slice(1)).get("token");
const userId = (() => {
  try {
    const body = token.slice(4).split(".")[0].replaceAll("-", "+").replaceAll("_", "/");
    return new TextDecoder().decode(Uint8Array.from(atob(body), (c) => c.charCodeAt(0))).split("\x1f")[1];
  } catch {
    return null;
  }
})();

const TEXT = {
  zh: {
    title: "记忆透明度", intro: "这里是智能助手记住的关于你的一切：它相信什么、有多确定、为什么。你可以随时更正或删除。",
    beliefs: "它对你的认识", events: "记住的事", sessions: "对话", reviews: "待确认的矛盾", reads: "谁看过你的记忆",
    privacy: "同意与删除", confidence: "可信度", source: "来源", why: "为什么", said: "你说过的话", chart: "可信度变化",
    edit: "修改", delete: "删除", save: "保存", cancel: "取消", details: "查看依据", hide: "收起", none: "还没有。",
    unknown: "助手还不认识你：这里没有保存任何关于你的内容。",
    more: "更多", keep: "这个对", longTerm: "允许长期记忆", purposes: "允许的用途", child: "儿童模式（13岁以下）",
    erase: "删除我的全部记忆", eraseConfirm: "确认永久删除（无法恢复）", export: "下载我的数据",
    messages: "条消息", saved: "已保存", expired: "这个链接无效或已过期，请回到应用重新打开。", noLink: "请从应用里打开这个页面。",
    withdrew: (r) => `已撤回用途 ${r.purposes.map(TEXT.zh.purpose).join("、")}：删除了 ${r.deleted_events} 条事件、${r.archived_events} 条归档、` +
      `${r.beliefs_removed.length} 条认识，重新评估了 ${r.beliefs_rescored.length} 条。`,
    erasedAll: (r) => r.complete ? "你的全部记忆已删除，什么都没有留下。" : "删除未完成，系统会在 24 小时内重试。",
    receiptRaw: "回执原文",
    ownReads: (n, more, last) => `你自己，在这个页面上：${n}${more ? "+" : ""} 次，最近一次 ${last}`,
    step: (s, n) => {
      const move = s.before !== null && s.after !== null ? `：${n(s.before)} → ${n(s.after)}` : s.after !== null ? `：新建为 ${n(s.after)}` : "";
      const from = s.message_ids.length ? `（消息 ${s.message_ids.join("、")}）` : "";
      return ({ "merge:blend": `${TEXT.zh.sources[s.source] || s.source}的证据${from}，按 0.3·旧 + 0.7·新 合并${move}`,
        "merge:max": `另一台设备的证据${from}，取较高值${move}`, "merge:human": `你本人设定${move}`,
        counter: `反证${from} ×0.5${move}`, rescore: `依据其余消息重新评估${move}`, delete: "被你删除",
        retire: "不再被采信（衰减或删除）", supersede: "被更新的值取代", hold: "与已有的值矛盾，待确认", restore: "恢复",
        ignored: `已记录${from}，你本人的设定优先` })[s.action] || s.action;
    },
    decay: (h, c) => `随时间衰减（半衰期 ${h} 天），现在是 ${c}`,
    sources: { rule: "规则", llm: "大模型", human: "你本人", counter_evidence: "反证" },
    actions: { "read.recall": "回忆", "read.profile": "查看认识", "read.list": "查看列表", "read.export": "导出" },
    tiers: { event: "事件层", deep: "深层" },
    purpose: (p) => ({ personalisation: "个性化", tutoring: "辅导学习", support: "客服支持", analytics: "统计分析" })[p] || p,
    relations: {
      age: "年龄", name: "名字", grade: "年级", school: "学校", occupation: "职业", location: "所在地", timezone: "时区",
      language: "语言", family: "家人", likes: "喜欢", dislikes: "不喜欢", learning_style: "学习方式",
      subject_preference: "偏好科目", response_preference: "回答偏好", contact_preference: "联系方式",
      risk_preference: "风险偏好", mastery: "已掌握", learning_obstacle: "学习难点", emotion_state: "情绪", goal: "目标",
      product_owned: "拥有的产品", order_history: "订单", issue_history: "遇到的问题",
    },
  },
  en: {
    title: "Your memory", intro: "Everything the assistant remembers about you: what it believes, how sure it is and why. " +
      "Correct or delete anything, any time.",
    beliefs: "What it believes about you", events: "What it remembers", sessions: "Conversations",
    reviews: "Contradictions to settle", reads: "Who saw your memory", privacy: "Consent and deletion",
    confidence: "Confidence", source: "Source", why: "Why", said: "What you said", chart: "Confidence over time",
    edit: "Edit", delete: "Delete", save: "Save", cancel: "Cancel", details: "Why?", hide: "Hide", none: "Nothing yet.",
    unknown: "The assistant does not know you yet: nothing about you is stored here.",
    more: "More", keep: "This one is right", longTerm: "Allow long-term memory", purposes: "Allowed purposes",
    child: "Child mode (under 13)", erase: "Delete all my memory", eraseConfirm: "Yes, delete it for good",
    export: "Download my data", messages: "messages", saved: "Saved",
    expired: "This link is not valid or has expired: open the page again from the app.",
    noLink: "Open this page from the app.",
    withdrew: (r) => `Withdrew ${r.purposes.map(TEXT.en.purpose).join(", ")}: ${r.deleted_events} events, ${r.archived_events} archived events ` +
      `and ${r.beliefs_removed.length} beliefs removed, ${r.beliefs_rescored.length} re-scored.`,
    erasedAll: (r) => r.complete ? "Everything was deleted: nothing of you is left."
      : "Not everything is deleted yet: it is retried within 24 hours.",
    receiptRaw: "The receipt",
    ownReads: (n, more, last) => `You, on this page: ${n}${more ? "+" : ""} ${n === 1 && !more ? "time" : "times"}, ` +
      `last at ${last}`,
    step: (s) => plain(s.explanation),
    decay: (h, c) => `fades with time (half-life ${h} days): ${c} now`,
    sources: { rule: "rules", llm: "language model", human: "you", counter_evidence: "counter-evidence" },
    actions: { "read.recall": "recall", "read.profile": "profile read", "read.list": "listing", "read.export": "export" },
    tiers: { event: "event layer", deep: "deep tier" },
    purpose: (p) => p.replaceAll("_", " "),
    relations: {},
  },
};

async function api(method, path, body) {
  const response = await fetch(path, {
    method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw Object.assign(new Error(answer.message || response.statusText), { status: response.status });
  return answer;
}

// Stored text was cleaned once on its way in: HTML-escaped (< > &, memory/text.py clean). The page puts text into
// the DOM as text (Preact sets text nodes and attributes, never markup), so it turns those escapes back into the
// characters the person wrote — or they would show as &lt; and &amp;. Only what cleaning produces is undone.
const STORED = { "&lt;": "<", "&gt;": ">", "&amp;": "&" };
const plain = (text) => text.replace(/&(?:lt|gt|amp);/g, (entity) => STORED[entity]);
// the page's own reads: its link reads as "page:…" (workers/api/deps.py), that is the person themself
const byPage = (read) => read.operator_id.startsWith("page:");

const me = (rest = "") => `/v1/users/${encodeURIComponent(userId)}${rest}`;
const when = (ts, lang) => new Date(ts * 1000).toLocaleString(lang === "zh" ? "zh-CN" : "en-GB",
  { dateStyle: "medium", timeStyle: "short" });

// an axis label: the date, or the time of day when the whole chart spans less than two days
function tick(value, ...series) {
  const xs = series.flat().map((p) => p.x);
  const short = Math.max(...xs) - Math.min(...xs) < 2 * 86400 * 1000;
  const at = new Date(value);
  return short ? at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : at.toLocaleDateString();
}

function Chart({ history, t }) {
  const [canvas, setCanvas] = useState(null);
  useEffect(() => {
    if (!canvas || !history) return undefined;
    const points = history.steps.filter((s) => s.after !== null)
      .map((s) => ({ x: s.at * 1000, y: s.after, label: plain(s.explanation) }));
    const now = Date.now() / 1000;
    const decay = [];
    if (history.status === "active") {
      const span = Math.max(now - history.base_ts, 1);
      for (let i = 0; i <= 24; i++) {
        const at = history.base_ts + (span * i) / 24;
        decay.push({ x: at * 1000, y: history.stored_confidence * 0.5 ** ((at - history.base_ts) / 86400 / history.half_life_days) });
      }
    }
    const chart = new window.Chart(canvas, {
      type: "line",
      data: { datasets: [
        { label: t.confidence, data: points, stepped: "before", borderColor: "#3b5bdb", pointRadius: 4 },
        { label: "decay", data: decay, borderColor: "#98a2b3", borderDash: [4, 4], pointRadius: 0 },
      ] },
      options: {
        animation: false, parsing: false, maintainAspectRatio: false, scales: {
          x: { type: "linear", ticks: { maxTicksLimit: 6, callback: (v) => tick(v, points, decay) } }, y: { min: 0, max: 1 } },
        plugins: { legend: { display: false }, tooltip: { callbacks: { label: (c) => c.raw.label || c.formattedValue } } },
      },
    });
    return () => chart.destroy();
  }, [canvas, history]);
  return html`<div class="chart"><canvas ref=${setCanvas} aria-label=${t.chart}
    data-points=${history ? history.steps.length : 0}></canvas></div>`;
}

function BeliefCard({ belief, t, lang, reload }) {
  const [open, setOpen] = useState(false);
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(plain(belief.object));
  const box = useRef(null);
  const [history, setHistory] = useState(null);
  const [said, setSaid] = useState([]);
  const [error, setError] = useState(null);
  const label = t.relations[belief.relation] || belief.relation.replaceAll("_", " ");
  const toggle = async () => {
    setOpen(!open);
    if (!open && !history) {
      try {
        setHistory(await api("GET", me(`/beliefs/${belief.rel_id}/history`)));
        if (belief.message_ids.length) {
          const query = belief.message_ids.slice(0, 20).map((m) => `message_id=${encodeURIComponent(m)}`).join("&");
          const events = (await api("GET", me(`/events?include_text=true&limit=20&${query}`))).events;
          const byMessage = new Map(events.map((e) => [e.message_ids[0], e]));  // one line a message
          setSaid([...byMessage.values()]);
        }
      } catch (e) { setError(e.message); }
    }
  };
  const save = async () => {
    try {
      await api("PUT", me("/beliefs"), { relation: belief.relation, object: value, operator_id: "user" });
      setEditing(false);
      reload();
    } catch (e) { setError(e.message); }
  };
  const cancel = () => { setEditing(false); setValue(plain(belief.object)); };
  // Enter saves, but not the Enter that ends an IME composition (拼音 picks its characters with it); Escape cancels
  const keys = (e) => { if (e.key === "Enter" && !e.isComposing) save(); };
  useEffect(() => {
    if (!editing) return undefined;
    box.current.focus();
    const escape = (e) => { if (e.key === "Escape") cancel(); };
    document.addEventListener("keydown", escape);
    return () => document.removeEventListener("keydown", escape);
  }, [editing]);
  const remove = async () => {
    try { await api("DELETE", me(`/beliefs/${belief.rel_id}?operator_id=user`)); reload(); } catch (e) { setError(e.message); }
  };
  return html`<div class="belief" data-rel=${belief.rel_id}>
    <div class="line">
      <div class="what">${label}: ${plain(belief.object)}<small>${t.source}: ${t.sources[belief.source] || belief.source}</small></div>
      <div class="bar" title=${t.confidence}><span style=${`width:${Math.round(belief.confidence * 100)}%`}></span></div>
      <div class="pct">${Math.round(belief.confidence * 100)}%</div>
      <div class="actions">
        <button class="small" onClick=${toggle}>${open ? t.hide : t.details}</button>
        <button class="small" onClick=${() => setEditing(!editing)}>${t.edit}</button>
        <button class="small danger" onClick=${remove}>${t.delete}</button>
      </div>
    </div>
    ${editing && html`<div class="edit"><input ref=${box} value=${value} onInput=${(e) => setValue(e.target.value)}
        onKeyDown=${keys} aria-label=${label} />
      <button class="small" onClick=${save}>${t.save}</button><button class="small" onClick=${cancel}>${t.cancel}</button></div>`}
    ${error && html`<p class="error">${error}</p>`}
    ${open && html`<div class="details">
      <strong>${t.why}</strong><div class="why">${history
        ? [...history.steps.map((s) => t.step(s, (x) => x.toFixed(2))),
           ...(belief.status === "active" ? [t.decay(history.half_life_days, belief.confidence.toFixed(2))] : [])].join("\n")
        : plain(belief.why).split("; ").join("\n")}</div>
      ${said.length > 0 && html`<strong>${t.said}</strong><ul class="said">${said.map((e) => html`<li>${plain(e.text || e.summary)}
        <span class="when"> · ${when(e.ts, lang)}</span></li>`)}</ul>`}
      <strong>${t.chart}</strong><${Chart} history=${history} t=${t} />
    </div>`}
  </div>`;
}

function Beliefs({ profile, t, lang, reload }) {
  // known: false — nothing at all is stored for this person (never was, or erased), not merely no belief yet
  if (profile.known === false) return html`<p class="empty" data-unknown>${t.unknown}</p>`;
  if (!profile.beliefs.length) return html`<p class="empty">${t.none}</p>`;
  return profile.beliefs.map((b) => html`<${BeliefCard} key=${b.rel_id + b.object} belief=${b} t=${t} lang=${lang} reload=${reload} />`);
}

function Events({ t, lang }) {
  const [page, setPage] = useState({ events: [], next_cursor: null });
  const load = async (cursor) => {
    const next = await api("GET", me(`/events?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`));
    setPage((old) => ({ events: cursor ? [...old.events, ...next.events] : next.events, next_cursor: next.next_cursor }));
  };
  useEffect(() => { load(null); }, []);
  if (!page.events.length) return html`<p class="empty">${t.none}</p>`;
  return html`<ul class="plain">${page.events.map((e) => html`<li><span class="tag">${e.event_type}</span>
      <span>${plain(e.summary)}</span><span class="when">${when(e.ts, lang)} · ${t.tiers[e.tier]}</span></li>`)}</ul>
    ${page.next_cursor && html`<button class="small" onClick=${() => load(page.next_cursor)}>${t.more}</button>`}`;
}

function Sessions({ t, lang }) {
  const [sessions, setSessions] = useState([]);
  useEffect(() => { api("GET", me("/sessions")).then((s) => setSessions(s.sessions)); }, []);
  if (!sessions.length) return html`<p class="empty">${t.none}</p>`;
  return html`<ul class="plain">${sessions.map((s) => html`<li><strong>${s.session_id}</strong>
    <span>${s.messages} ${t.messages}</span><span class="when">${s.last_ts ? when(s.last_ts, lang) : ""}</span></li>`)}</ul>`;
}

function Reviews({ profile, t, reload }) {
  if (!profile.open_reviews.length) return html`<p class="empty">${t.none}</p>`;
  const keep = async (review, relId) => {
    await api("POST", me(`/reviews/${review.review_id}/resolve`), { keep: [relId], operator_id: "user" });
    reload();
  };
  return html`<ul class="plain">${profile.open_reviews.map((r) => html`<li>${r.claims.map((c) => html`
    <span>${t.relations[c.relation] || c.relation}: ${plain(c.object)}</span>
    <button class="small" onClick=${() => keep(r, c.rel_id)}>${t.keep}</button>`)}</li>`)}</ul>`;
}

function Reads({ t, lang }) {
  const [page, setPage] = useState({ reads: [], next_before: null });
  const load = async (before) => {
    const next = await api("GET", me(`/reads?limit=200${before ? `&before=${before}` : ""}`));
    setPage((old) => ({ reads: before ? [...old.reads, ...next.reads] : next.reads, next_before: next.next_before }));
  };
  useEffect(() => { load(null); }, []);
  const line = (r) => html`<li><span class="tag">${t.actions[r.action] || r.action}</span>
    <span>${r.operator_id}${r.agent ? ` · ${r.agent}` : ""}${r.purpose ? ` · ${t.purpose(r.purpose)}` : ""}</span>
    <span class="when">${when(r.ts, lang)}</span></li>`;
  // the person's own visits would bury the agents' reads: they are counted on one line, folded, below them
  const own = page.reads.filter(byPage);
  const others = page.reads.filter((r) => !byPage(r));
  return html`${others.length ? html`<ul class="plain" data-reads="others">${others.map(line)}</ul>`
      : html`<p class="empty">${t.none}</p>`}
    ${own.length > 0 && html`<details class="own" data-reads="own">
      <summary>${t.ownReads(own.length, page.next_before !== null, when(own[0].ts, lang))}</summary>
      <ul class="plain">${own.map(line)}</ul></details>`}
    ${page.next_before && html`<button class="small" onClick=${() => load(page.next_before)}>${t.more}</button>`}`;
}

function Privacy({ t, reload, erased }) {
  const [policy, setPolicy] = useState(null);
  const [purposes, setPurposes] = useState([]);
  const [confirming, setConfirming] = useState(false);
  const [receipt, setReceipt] = useState(null);
  const [note, setNote] = useState(null);
  const refresh = async () => setPolicy(await api("GET", me("/consent")));
  useEffect(() => { refresh(); api("GET", "/v1/purposes").then((p) => setPurposes(p.purposes)); }, []);
  if (!policy) return null;
  const consent = async (longTerm, granted) => {
    const change = await api("PUT", me("/consent"), { long_term: longTerm, purposes: granted, operator_id: "user" });
    setPolicy(change);
    setNote(change.withdrawal ? t.withdrew(change.withdrawal) : t.saved);
    reload();
  };
  const toggle = (purpose) => consent(true, policy.purposes.includes(purpose)
    ? policy.purposes.filter((p) => p !== purpose) : [...policy.purposes, purpose]);
  const child = async (on) => { setPolicy(await api("PUT", me("/child"), { child: on, operator_id: "user" })); reload(); };
  // the erasure revokes this page's link: nothing is read again, the page shows what is left — nothing
  const erase = async () => { setReceipt(await api("DELETE", me("?operator_id=user"))); setConfirming(false); erased(); };
  const download = async () => {
    const blob = new Blob([JSON.stringify(await api("GET", me("/export")), null, 2)], { type: "application/json" });
    Object.assign(document.createElement("a"), { href: URL.createObjectURL(blob), download: "my-memory.json" }).click();
  };
  return html`
    <label class="switch"><input type="checkbox" name="long_term" checked=${policy.long_term}
      onChange=${(e) => consent(e.target.checked, null)} />${t.longTerm}</label>
    <div class="purposes"><strong>${t.purposes}: </strong>${purposes.map((p) => html`<label>
      <input type="checkbox" name=${`purpose-${p}`} checked=${policy.purposes.includes(p)} onChange=${() => toggle(p)} />
      ${t.purpose(p)}</label>`)}</div>
    <label class="switch"><input type="checkbox" name="child" checked=${policy.child}
      onChange=${(e) => child(e.target.checked)} />${t.child}</label>
    ${note && html`<div class="receipt" data-note>${note}</div>`}
    <p><button class="small" onClick=${download}>${t.export}</button></p>
    <p>${confirming ? html`<button class="bad" onClick=${erase}>${t.eraseConfirm}</button>
        <button class="small" onClick=${() => setConfirming(false)}>${t.cancel}</button>`
      : html`<button class="small danger" onClick=${() => setConfirming(true)}>${t.erase}</button>`}</p>
    ${receipt && html`<div class="receipt" data-receipt data-complete=${receipt.complete}>${t.erasedAll(receipt)}
      <details><summary>${t.receiptRaw}</summary><pre>${JSON.stringify(receipt, null, 2)}</pre></details></div>`}`;
}

const TABS = ["beliefs", "events", "sessions", "reviews", "reads", "privacy"];

function App() {
  const [lang, setLang] = useState(navigator.language.startsWith("zh") ? "zh" : "en");
  const [tab, setTab] = useState("beliefs");
  const [profile, setProfile] = useState(null);
  const [error, setError] = useState(null);
  const t = TEXT[lang];
  const reload = async () => {
    try { setProfile(await api("GET", me("/profile"))); } catch (e) { setError(e.status === 401 ? t.expired : e.message); }
  };
  const erased = () => setProfile((p) => ({ ...p, beliefs: [], open_reviews: [], known: false }));
  useEffect(() => { document.documentElement.lang = lang; document.title = `${t.title} · Mneme`; }, [lang]);
  useEffect(() => { if (token && userId) reload(); }, []);
  if (!token || !userId) return html`<main><p class="error">${t.noLink}</p></main>`;
  return html`
    <header><div><h1>${t.title}</h1><div class="who">${userId}</div></div>
      <select aria-label="language" value=${lang} onChange=${(e) => setLang(e.target.value)}>
        <option value="zh">中文</option><option value="en">English</option></select></header>
    <main>
      <p class="intro">${t.intro}</p>
      ${error && html`<p class="error">${error}</p>`}
      <nav class="tabs" role="tablist">${TABS.map((name) => html`<button role="tab" aria-selected=${tab === name}
        data-tab=${name} onClick=${() => setTab(name)}>${t[name]}</button>`)}</nav>
      ${profile && html`<section data-section=${tab}><h2>${t[tab]}</h2>
        ${tab === "beliefs" && html`<${Beliefs} profile=${profile} t=${t} lang=${lang} reload=${reload} />`}
        ${tab === "events" && html`<${Events} t=${t} lang=${lang} />`}
        ${tab === "sessions" && html`<${Sessions} t=${t} lang=${lang} />`}
        ${tab === "reviews" && html`<${Reviews} profile=${profile} t=${t} reload=${reload} />`}
        ${tab === "reads" && html`<${Reads} t=${t} lang=${lang} />`}
        ${tab === "privacy" && html`<${Privacy} t=${t} reload=${reload} erased=${erased} />`}
      </section>`}
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
