// The leaf dashboard: polls GET /admin/dashboard (same origin) and draws it. Plain DOM, no
// library, no build step. Every value from the network goes in through textContent or a
// non-style attribute, never as HTML; widths go through the CSSOM (the CSP forbids style="").
"use strict";
(() => {
  const DATA_URL = "/admin/dashboard";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const HISTORY = 150; // points kept per series
  const COLORS = 6; // series colours in app.css (.s0 … .s5)
  const TOKEN_KEY = "leaf.dashboard.token";

  const refreshSecs = (() => {
    const raw = new URLSearchParams(location.search).get("refresh");
    const n = raw === null || raw.trim() === "" ? NaN : Math.round(Number(raw));
    return Number.isFinite(n) ? Math.min(60, Math.max(1, n)) : 2;
  })();
  const MIN_SLOTS = 20; // the charts zoom in until this many polls are shown
  const GAP_MS = Math.max(3 * refreshSecs * 1000, 5000); // a longer gap breaks a line
  const TIMEOUT_MS = Math.min(30000, Math.max(8000, 3 * refreshSecs * 1000));

  // ---- the token: this tab's session storage (memory if storage is off) ----
  let memToken = null;
  const token = {
    get() { try { return sessionStorage.getItem(TOKEN_KEY); } catch (_) { return memToken; } },
    set(v) { try { sessionStorage.setItem(TOKEN_KEY, v); } catch (_) { memToken = v; } },
    clear() { memToken = null; try { sessionStorage.removeItem(TOKEN_KEY); } catch (_) { /* memory only */ } },
  };
  // `/ui#token=<bearer>`: into session storage, out of the address bar (and of the history).
  // True if the fragment held a token.
  function tokenFromFragment() {
    if (location.hash.length < 2) return false;
    for (const part of location.hash.slice(1).split("&")) {
      if (!part.startsWith("token=")) continue;
      let v = part.slice(6);
      try { v = decodeURIComponent(v); } catch (_) { /* keep it raw */ }
      if (v) token.set(v);
      history.replaceState(null, "", location.pathname + location.search);
      return true;
    }
    return false;
  }
  tokenFromFragment();

  // ---- the tag search: a prefix, sent as ?prefix= (the node lists only those tags) ----
  const TAG_CHARS = /^[A-Za-z0-9_.:-]*$/;
  // `/ui?tag=<prefix>` opens the page searching for it (a link to a tenant's tags).
  let tagPrefix = (() => {
    const v = (new URLSearchParams(location.search).get("tag") || "").trim();
    return TAG_CHARS.test(v) && v.length <= 128 ? v : "";
  })();
  function dataUrl() {
    return tagPrefix ? `${DATA_URL}?prefix=${encodeURIComponent(tagPrefix)}` : DATA_URL;
  }
  function searchChanged() {
    const v = $("tag-search").value.trim();
    if (!TAG_CHARS.test(v)) {
      set("tag-search-note", "a tag has only A-Z a-z 0-9 _ . : -");
      return;
    }
    set("tag-search-note", "");
    if (v === tagPrefix) return;
    tagPrefix = v;
    poll(true);
  }

  // ---- state ----
  let paused = false;
  let inFlight = false;
  let refreshes = 0;
  let lastOk = null; // Date of the last good answer
  let prev = null; // { now, total, tags: Map(tag -> served), uptime } of the last good answer
  // Series of { t: now_ms, v }, one point per good poll; `polls` counts the polls (capped).
  const hist = { node: null, polls: 0, ids: [], lag: new Map(), tags: new Map(), colors: new Map() };

  // ---- DOM helpers ----
  const $ = (id) => document.getElementById(id);
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  const td = (text, cls, title) => {
    const e = el("td", text, cls);
    if (title) e.title = String(title);
    return e;
  };
  const svg = (tag, attrs, text) => {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = String(text);
    return e;
  };
  const set = (id, text, cls) => {
    const e = $(id);
    e.textContent = String(text);
    if (cls !== undefined) e.className = cls;
    return e;
  };
  const emptyRow = (cols, text) => {
    const tr = el("tr", null, "empty");
    const c = el("td", text);
    c.colSpan = cols;
    tr.append(c);
    return tr;
  };
  const has = (v) => v !== null && v !== undefined;
  const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

  // ---- formatting ----
  const DASH = "—";
  const fmtInt = (n) => (has(n) ? Number(n).toLocaleString("en-US") : DASH);
  // Table rates: plain digits (machine-readable), one decimal below 10.
  const fmtRate = (r) => (has(r) && Number.isFinite(r) ? (r < 10 ? r.toFixed(1) : String(Math.round(r))) : DASH);
  const fmtCompact = (n) => {
    if (!has(n) || !Number.isFinite(Number(n))) return DASH;
    n = Number(n);
    const a = Math.abs(n);
    if (a >= 1e15) return n.toExponential(1).replace("e+", "e");
    for (const [d, u] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (a >= d) return (n / d).toFixed(a / d < 10 ? 2 : a / d < 100 ? 1 : 0) + u;
    }
    return Number.isInteger(n) ? String(n) : n.toFixed(a < 10 ? 1 : 0);
  };
  const YEAR = 365.25 * 86400;
  // One unit, for spans such as "exhausted in": "3.2 years", "5 d", "7.5 h".
  const fmtSpan = (s) => {
    if (!has(s) || !Number.isFinite(s)) return DASH;
    const one = (v, u) => (v < 10 ? v.toFixed(1).replace(/\.0$/, "") : String(Math.round(v))) + u;
    if (s >= 10000 * YEAR) return "> 10,000 years";
    if (s >= YEAR) return one(s / YEAR, " years");
    if (s >= 86400) return one(s / 86400, " d");
    if (s >= 3600) return one(s / 3600, " h");
    if (s >= 60) return one(s / 60, " min");
    return one(s, " s");
  };
  // Two units, for uptime: "3 d 4 h", "1 h 5 min", "42 s".
  const fmtUptime = (s) => {
    if (!has(s)) return DASH;
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    if (d) return `${d} d ${h} h`;
    if (h) return `${h} h ${m} min`;
    if (m) return `${m} min ${Math.floor(s % 60)} s`;
    return `${Math.floor(s)} s`;
  };
  const fmtMs = (ms) => (has(ms) ? `${ms} ms` : DASH);
  const fmtSigned = (ms) => (has(ms) ? `${ms > 0 ? "+" : ""}${ms} ms` : DASH);
  const pad = (n) => String(n).padStart(2, "0");
  const fmtClock = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  const slots = () => Math.min(HISTORY, Math.max(MIN_SLOTS, hist.polls));
  const fmtWindow = () => {
    const s = slots() * refreshSecs;
    return s >= 3600 ? `${+(s / 3600).toFixed(1)} h` : s >= 120 ? `${+(s / 60).toFixed(1)} min` : `${s} s`;
  };
  const errMsg = (e) => (e && e.message ? e.message : String(e));

  // ---- status: body hooks, banner, "updated" ----
  function setState(state) {
    document.body.dataset.state = state;
    const stale = state !== "ok" && refreshes > 0;
    document.body.dataset.stale = String(stale);
    $("stale").classList.toggle("hidden", !stale);
  }
  function banner(text, kind) {
    const b = $("banner");
    b.textContent = text || "";
    b.className = text ? "banner" + (kind === "auth" ? " auth" : "") : "banner hidden";
  }
  function fail(state, text) {
    setState(state);
    const since = lastOk ? ` Showing the data of ${fmtClock(lastOk)} (stale); still polling.` : " Still polling.";
    banner(`${fmtClock(new Date())} · ${text}.${since}`, state);
  }
  // A JSON error body `{"code": "...", "message": "..."}`, or the status alone.
  async function describe(resp) {
    let text = `HTTP ${resp.status}${resp.statusText ? " " + resp.statusText : ""}`;
    try {
      const body = await resp.json();
      if (body && typeof body === "object") {
        if (body.code) text += ` (${clip(String(body.code), 80)})`;
        if (body.message) text += `: ${clip(String(body.message), 400)}`;
      }
    } catch (_) { /* not JSON */ }
    return text;
  }
  function showToken() {
    set("token-state", token.get() ? "token set" : "no token");
  }

  // ---- polling: one request at a time; a tick while one is in flight is skipped ----
  async function poll(force) {
    if (inFlight || (paused && !force)) return;
    inFlight = true;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    try {
      const headers = { Accept: "application/json" };
      const t = token.get();
      if (t) headers.Authorization = "Bearer " + t;
      let resp;
      try {
        resp = await fetch(dataUrl(), { headers, cache: "no-store", credentials: "same-origin", signal: ctl.signal });
      } catch (e) {
        fail("error", ctl.signal.aborted ? `No answer from the node within ${TIMEOUT_MS / 1000} s` : `Network error: cannot reach the node (${errMsg(e)})`);
        return;
      }
      if (resp.status === 401 || resp.status === 403) {
        const why = await describe(resp);
        const ask = resp.status === 401
          ? (t ? "The node refused the saved token" : "This node needs a token")
          : "The token lacks the right to read the dashboard";
        fail("auth", `${ask} — ${why}. Enter a token with the 'cluster' right (or the admin token) above, or open /ui#token=<token>`);
        return;
      }
      if (!resp.ok) {
        fail("error", `The node answered ${await describe(resp)}`);
        return;
      }
      let d;
      try {
        d = await resp.json();
        if (!d || typeof d !== "object" || !d.cluster) throw new Error("not a dashboard document");
      } catch (e) {
        fail("error", `Unexpected answer from ${DATA_URL} (${errMsg(e)})`);
        return;
      }
      try {
        render(d);
      } catch (e) {
        console.error(e);
        fail("error", `Cannot show the answer (${errMsg(e)})`);
        return;
      }
      refreshes += 1;
      lastOk = new Date();
      document.body.dataset.refreshes = String(refreshes);
      setState("ok");
      banner(null);
      set("updated", fmtClock(lastOk));
    } finally {
      clearTimeout(timer);
      inFlight = false;
    }
  }

  // ---- history ----
  function pushPt(arr, t, v) {
    arr.push({ t, v });
    while (arr.length > HISTORY) arr.shift();
  }
  function colorOf(id) {
    if (!hist.colors.has(id)) hist.colors.set(id, hist.colors.size % COLORS);
    return hist.colors.get(id);
  }

  // ---- rendering ----
  function render(d) {
    const c = d.cluster;
    const nodes = Array.isArray(d.nodes) ? d.nodes : [];
    const tags = Array.isArray(d.tags) ? d.tags : [];
    const totals = d.totals || {};
    const now = num(d.now_ms);
    // Another node answers (a balancer), or it restarted: its counters are not comparable.
    if (hist.node !== d.node_id || (prev && num(d.uptime_secs) < prev.uptime)) {
      hist.node = d.node_id;
      hist.polls = 0;
      hist.ids = [];
      hist.lag.clear();
      hist.tags.clear();
      hist.colors.clear();
      prev = null;
    }
    const dt = prev ? (now - prev.now) / 1000 : 0;
    hist.polls = Math.min(HISTORY, hist.polls + 1);
    const total = num(totals.segment_ids) + num(totals.snowflake_ids);
    let rate = null;
    if (prev && dt > 0) {
      if (total >= prev.total) rate = (total - prev.total) / dt;
      else hist.ids = []; // the counters began again: a restart
    }
    if (rate !== null) pushPt(hist.ids, now, rate);

    const replication = Array.isArray(c.replication) ? c.replication : null;
    if (replication) {
      const seen = new Set();
      for (const r of replication) {
        if (r.node_id === d.node_id) continue;
        seen.add(r.node_id);
        if (!hist.lag.has(r.node_id)) hist.lag.set(r.node_id, []);
        pushPt(hist.lag.get(r.node_id), now, num(r.lag));
      }
      for (const id of [...hist.lag.keys()]) if (!seen.has(id)) hist.lag.delete(id);
    } else {
      hist.lag.clear();
    }

    renderHeader(d, c, nodes);
    renderSummary(d, c, totals, rate);
    renderMembers(d, c, nodes, replication);
    const served = renderTags(d, tags, dt, now);
    renderWorkers(d, c, nodes, now);
    renderRegions(d, now);
    renderErrors(d, totals);
    renderCharts(d, c, replication);
    prev = { now, total, tags: served, uptime: num(d.uptime_secs) };
  }

  function renderHeader(d, c, nodes) {
    set("node-id", d.node_id);
    set("node-state", has(c.state) ? c.state : "");
    set("version", has(d.version) ? d.version : DASH);
    set("uptime", fmtUptime(d.uptime_secs));
    set("leader", has(c.leader_id) ? c.leader_id : "none");
    set("term", has(c.term) ? c.term : DASH);
    const down = nodes.filter((n) => !n.health || !n.health.ready);
    let verdict = "healthy", cls = "badge ok";
    if (!has(c.leader_id)) [verdict, cls] = ["no leader", "badge bad"];
    else if (down.length || !nodes.length) [verdict, cls] = ["degraded", "badge warn"];
    const v = set("verdict", verdict, cls);
    v.title = down.length
      ? down.map((n) => `node ${n.node_id}: ${n.health ? n.health.reason || "not ready" : n.error || "unreachable"}`).join("\n")
      : `${nodes.length} of ${nodes.length} members ready`;
  }

  function renderSummary(d, c, totals, rate) {
    set("sum-rate", rate === null ? DASH : fmtCompact(rate));
    set("sum-seg", fmtInt(totals.segment_ids));
    set("sum-snow", fmtInt(totals.snowflake_ids));
    set("sum-err", fmtInt(totals.errors), num(totals.errors) ? "v warn" : "v");
    const i = (v) => (has(v) ? v : DASH);
    set("sum-log", `${i(c.last_log_index)} / ${i(c.committed_index)} / ${i(c.last_applied_index)}`);
    set("sum-snap", `${i(c.snapshot_index)} / ${i(c.purged_index)}`);
    const sf = c.health && c.health.snowflake;
    const f = sf && sf.forecast;
    set("sum-epoch", f ? `${num(f.epoch_years_left).toFixed(1)} years` : DASH);
    set("sum-free", f ? `${f.free_worker_ids}` : DASH, f && f.free_worker_ids < 16 ? "v warn" : "v").title = "of 1,024";
    const ver = c.version;
    set("sum-version", ver ? `${ver.active} / ${ver.supported}` : DASH).title =
      "the version the cluster runs (raised once every member supports a newer one) / the newest this node supports";
  }

  // Ready: text plus colour plus symbol, the reason as a tooltip.
  function readyCell(n) {
    const h = n.health;
    if (!h) return td("unreachable", "st bad", n.error || "did not answer");
    if (h.ready) return td("ready", "st ok");
    return td("not ready", "st warn", h.reason || "not ready");
  }
  const SF_CLASS = { serving: "st ok", starting: "st warn", off: "st bad", disabled: "st muted" };

  function renderMembers(d, c, nodes, replication) {
    const repl = new Map((replication || []).map((r) => [r.node_id, r]));
    const supports = new Map((c.members || []).map((m) => [m.node_id, m.supports_version]));
    const active = c.version ? c.version.active : null;
    const rows = nodes.map((n) => {
      const h = n.health;
      const isLeader = has(c.leader_id) && n.node_id === c.leader_id;
      const tr = el("tr", null, h ? "" : "unreachable");
      tr.dataset.nodeId = String(n.node_id);
      tr.dataset.ready = h ? String(!!h.ready) : "unknown";
      tr.dataset.leader = String(isLeader);
      const name = td(n.node_id);
      if (isLeader) name.append(el("span", "★ leader", "mark leader"));
      if (n.node_id === d.node_id) name.append(el("span", "this node", "mark self"));
      const sv = supports.get(n.node_id);
      const vCls = has(sv) && has(active) && sv < active ? "num bad" : "num";
      tr.append(name, td(n.addr, "mono"), td(n.role),
        td(has(sv) ? sv : DASH, vCls, has(sv) ? "the newest cluster version it supports" : "shown by the leader's dashboard"),
        readyCell(n));
      const termCls = h && has(c.term) && h.term !== c.term ? "num warn" : "num";
      tr.append(td(h ? h.term : DASH, termCls, h && h.term !== c.term ? `this node is at term ${c.term}` : ""));
      tr.append(td(h ? fmtInt(h.last_applied_index) : DASH, "num"));
      const ack = h ? h.quorum_ack_age_ms : null;
      tr.append(td(h ? (has(ack) ? fmtMs(ack) : "unknown") : DASH, has(ack) && ack > 5000 ? "num warn" : "num",
        "time since this node last confirmed that a quorum follows its leader"));
      if (replication) {
        const r = repl.get(n.node_id);
        const lagCls = !r ? "num" : !has(r.matched_index) ? "num bad" : r.lag > 100 ? "num warn" : "num";
        tr.append(td(r ? fmtInt(r.lag) : DASH, lagCls, r ? `matched index ${has(r.matched_index) ? r.matched_index : "unknown"}` : "not replicated to"));
      } else {
        tr.append(td(DASH, "num muted", "replication is shown by the leader's dashboard"));
      }
      tr.append(td(fmtMs(n.rtt_ms), "num"));
      const off = n.clock_offset_ms;
      tr.append(td(fmtSigned(off), has(off) && Math.abs(off) > 1000 ? "num warn" : "num", "its clock minus this node's"));
      const sf = h && h.snowflake;
      tr.append(sf ? td(sf.state + (has(sf.worker_id) ? ` #${sf.worker_id}` : ""), SF_CLASS[sf.state] || "st", sf.reason || "")
        : td(DASH, "muted"));
      const note = n.error || (h && !h.ready && h.reason) || (sf && sf.state !== "serving" && sf.state !== "disabled" && sf.reason) || "";
      tr.append(td(note, n.error ? "note-cell bad" : "note-cell"));
      return tr;
    });
    if (!rows.length) rows.push(emptyRow(13, "No members."));
    $("members").tBodies[0].replaceChildren(...rows);
    const ready = nodes.filter((n) => n.health && n.health.ready).length;
    set("members-count", `(${ready} of ${nodes.length} ready)`);
    set("replication-note", replication ? "Lag: entries each follower is behind this leader's log."
      : `Node ${d.node_id} is not the leader: replication lag is shown by the leader's dashboard` +
        (has(c.leader_id) ? ` (node ${c.leader_id}).` : "."));
  }

  function renderTags(d, tags, dt, now) {
    const served = new Map();
    const rows = tags.map((t) => {
      const info = t.info || {};
      const tag = String(info.tag);
      const count = num(t.served);
      served.set(tag, count);
      const before = prev ? prev.tags.get(tag) : undefined;
      let series = hist.tags.get(tag);
      if (!series) hist.tags.set(tag, (series = []));
      let r = null;
      if (before !== undefined && dt > 0) {
        if (count >= before) r = (count - before) / dt;
        else series.length = 0; // counter went back: restart the series
      }
      if (r !== null) pushPt(series, now, r);

      const tr = el("tr");
      tr.dataset.tag = tag;
      const name = td(tag, "tagname", info.description || "");
      tr.append(name);
      let profile = has(info.profile) ? String(info.profile) : DASH;
      if (has(info.day)) profile += ` · ${info.day}`;
      tr.append(td(profile, "", has(info.upper_bound) ? `upper bound ${info.upper_bound}` : ""));
      tr.append(td(count, "num served"), td(fmtRate(r), "num rate"));
      const sp = el("td", null, "spark");
      sp.append(sparkline(series));
      tr.append(sp, bufferCell(t.cache));
      const cache = t.cache;
      tr.append(td(cache ? fmtInt(cache.dynamic_step) : fmtInt(info.step), "num", `stored step ${info.step}`));
      const f = cache && cache.forecast;
      tr.append(td(f && has(f.rate_per_sec) ? fmtCompact(f.rate_per_sec) + "/s" : DASH, "num",
        "IDs allocated per second across the cluster"));
      tr.append(td(f ? fmtCompact(f.ids_left) : DASH, "num", f ? `${f.ids_left} IDs left` : "no forecast on this node yet"));
      let ex = DASH, exCls = "num";
      if (f) {
        if (has(f.exhausted_in_secs)) {
          ex = fmtSpan(f.exhausted_in_secs);
          if (f.exhausted_in_secs < 7 * 86400) exCls = "num bad";
          else if (f.exhausted_in_secs < 90 * 86400) exCls = "num warn";
        } else if (f.rate_per_sec === 0 || num(f.ids_left) > 1e15) ex = "never";
      }
      tr.append(td(ex, exCls));
      return tr;
    });
    for (const tag of [...hist.tags.keys()]) if (!served.has(tag)) hist.tags.delete(tag);
    if (!rows.length) rows.push(emptyRow(10, tagPrefix ? "No tag starts with that." : "No tags yet."));
    $("tags").tBodies[0].replaceChildren(...rows);
    const total = has(d.tags_total) ? d.tags_total : tags.length;
    const which = tagPrefix ? ` starting with "${tagPrefix}"` : "";
    set("tags-count", total > tags.length ? `(${tags.length} busiest of ${total}${which})` : `(${total}${which})`);
    return served;
  }

  // IDs left in the current segment, as a bar and "75% · next ready".
  function bufferCell(cache) {
    const cell = el("td", null, "bufcell");
    if (!cache) return td("not used on this node yet", "muted");
    const cur = cache.current;
    if (!cur) {
      cell.textContent = cache.initialised ? "empty" : "loading";
      cell.className = cache.initialised ? "bufcell bad" : "bufcell muted";
    } else {
      const size = Math.max(1, cur.end - cur.start);
      const pct = Math.max(0, Math.min(100, ((cur.end - cur.position) / size) * 100));
      const wrap = el("span", null, "buf");
      const bar = el("span", null, "bar" + (pct <= 0 ? " empty" : pct < 20 && !cache.next_ready ? " low" : ""));
      const fill = el("span");
      fill.style.width = pct.toFixed(1) + "%";
      bar.append(fill);
      let text = `${Math.round(pct)}% · ${cache.next_ready ? "next ready" : "next not ready"}`;
      const spares = Array.isArray(cache.spares) ? cache.spares.length : 0;
      if (spares) text += ` · +${spares} spare`;
      if (cache.refill_in_flight) text += " · refilling";
      wrap.append(bar, el("span", text));
      cell.append(wrap);
      cell.title = `current ${cur.start}…${cur.end - 1}, next ${cur.position}` +
        (cache.next ? `; next segment ${cache.next.start}…${cache.next.end - 1}` : "");
    }
    if (cache.last_error) {
      cell.append(el("span", "⚠ refill error", "mark bad"));
      cell.title = `last refill error: ${cache.last_error}`;
    }
    return cell;
  }

  function renderWorkers(d, c, nodes, now) {
    const byNode = new Map(nodes.map((n) => [n.node_id, n]));
    const workers = Array.isArray(c.workers) ? c.workers : [];
    const rows = workers.map((w) => {
      const tr = el("tr");
      tr.dataset.workerId = String(w.worker_id);
      const n = byNode.get(w.node_id);
      const sf = n && n.health && n.health.snowflake;
      const state = sf ? sf.state : n ? "unreachable" : "not a member";
      tr.append(td(w.worker_id, "num"), td(w.node_id, "num"));
      tr.append(td(state, sf ? SF_CLASS[state] || "st" : "st bad", sf ? sf.reason || "" : n ? n.error || "" : ""));
      tr.append(td(fmtSigned(w.high_water_ms - now), "num", "high-water mark minus the answering node's clock"));
      const left = (w.lease_expires_ms - now) / 1000;
      tr.append(td(left >= 0 ? `${left.toFixed(1)} s` : `expired ${fmtSpan(-left)} ago`,
        left < 0 ? "num bad" : left < 10 ? "num warn" : "num"));
      tr.append(td(n ? fmtSigned(n.clock_offset_ms) : DASH, "num"));
      tr.append(td(has(w.previous_node_id) ? w.previous_node_id : DASH, "muted"));
      return tr;
    });
    if (!rows.length) rows.push(emptyRow(7, "No snowflake worker IDs registered."));
    $("workers").tBodies[0].replaceChildren(...rows);
    set("workers-count", `(${workers.length})`);
  }

  // A global tier's registry, a region's identity and blocks, and the homes either knows;
  // the section shows only on a cluster that is one of them.
  function renderRegions(d, now) {
    const r = d.region;
    $("regions-section").classList.toggle("hidden", !r);
    if (!r) return;
    const here = r.here;
    set("region-here", here ? `this cluster is region ${here.name} (ID ${here.id}, worker IDs ${here.first_worker}–${here.last_worker})`
      : r.registry.length ? "this cluster is a global tier" : "");
    const regions = (here && !r.registry.length)
      ? [{ name: here.name, id: here.id, first_worker: here.first_worker, last_worker: here.last_worker }]
      : r.registry;
    const rows = regions.map((g) => {
      const tr = el("tr");
      tr.dataset.region = g.name;
      tr.append(td(g.name, "mono"), td(g.id, "num"), td(`${g.first_worker}–${g.last_worker}`, "num"));
      tr.append(td(has(g.joined_ms) ? new Date(g.joined_ms).toISOString() : DASH, "muted"));
      tr.append(td(has(g.retired_ms) ? "retired" : "active", has(g.retired_ms) ? "st bad" : "st ok"));
      return tr;
    });
    if (!rows.length) rows.push(emptyRow(5, "No region registered."));
    $("regions").tBodies[0].replaceChildren(...rows);
    const blocks = r.blocks.map((b) => {
      const tr = el("tr");
      tr.dataset.tag = b.tag;
      const runway = has(b.runway_secs) ? fmtSpan(b.runway_secs) : DASH;
      tr.append(td(b.tag, "mono"), td(fmtInt(b.remaining), "num"), td(b.queued, "num"));
      tr.append(td(runway, has(b.runway_secs) && b.runway_secs < 60 ? "num warn" : "num",
        "how long the IDs left last at the tag's rate measured on this node"));
      return tr;
    });
    if (!blocks.length) blocks.push(emptyRow(4, here ? "No tag holds blocks yet." : "Blocks are held by regions."));
    $("blocks").tBodies[0].replaceChildren(...blocks);
    set("blocks-count", `(${r.blocks.length} of ${r.blocks_total})`);
    const homes = r.homes.map((h) => {
      const tr = el("tr");
      tr.dataset.tag = h.tag;
      tr.append(td(h.tag, "mono"), td(h.region, here && h.region === here.name ? "mono ok" : "mono"), td(h.epoch, "num"));
      tr.append(td(has(h.from) ? h.from : DASH, "muted"));
      const wait = (h.ready_ms - now) / 1000;
      tr.append(td(wait > 0 ? `in ${fmtSpan(wait)}` : "now", wait > 0 ? "warn" : ""));
      return tr;
    });
    if (!homes.length) homes.push(emptyRow(5, "No homed tag yet."));
    $("homes").tBodies[0].replaceChildren(...homes);
    set("homes-count", `(${r.homes.length} of ${r.homes_total})`);
  }

  function renderErrors(d, totals) {
    const errors = Array.isArray(d.recent_errors) ? d.recent_errors : [];
    const rows = errors.map((e) => {
      const tr = el("tr");
      const at = new Date(e.at_ms);
      tr.append(td(fmtClock(at), "num", at.toISOString()));
      tr.append(td(e.status, e.status >= 500 ? "num bad" : "num warn"));
      tr.append(td(e.code, "mono"), td(e.route, "mono"), td(e.message, "msg"));
      return tr;
    });
    if (!rows.length) rows.push(emptyRow(5, "No recent error answers."));
    $("errors").tBodies[0].replaceChildren(...rows);
    set("errors-total", `(${errors.length} newest · ${fmtInt(totals.errors)} since start)`);
  }

  // ---- charts: inline SVG ----
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }
  // Runs of points without a long gap (a pause, failed polls): each run is its own line.
  // Each run lists the points' indexes.
  function runs(points) {
    const out = [];
    let cur = [];
    for (let i = 0; i < points.length; i++) {
      if (cur.length && points[i].t - points[i - 1].t > GAP_MS) { out.push(cur); cur = []; }
      cur.push(i);
    }
    if (cur.length) out.push(cur);
    return out;
  }
  // x of the i-th of n points (the newest at the right edge), one slot per poll.
  const xAt = (i, n, left, width) => Math.max(left, left + width - ((n - 1 - i) / (slots() - 1)) * width);
  function lineChart(box, series, emptyText, label) {
    const W = Math.max(300, Math.round(box.clientWidth || 600)), H = 150;
    const L = 46, R = 10, T = 10, B = 20, pw = W - L - R, ph = H - T - B;
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": label });
    const usable = series.filter((s) => s.points.length >= 2);
    const max = niceMax(Math.max(0, ...usable.flatMap((s) => s.points.map((p) => p.v))));
    for (const f of [0, 0.5, 1]) {
      const y = (T + ph - f * ph).toFixed(1);
      root.append(svg("line", { x1: L, y1: y, x2: W - R, y2: y, class: f ? "grid" : "axis" }));
      root.append(svg("text", { x: L - 5, y: +y + 3.5, "text-anchor": "end" }, f ? fmtCompact(max * f).replace(/\.0+(?=[kMGT]?$)/, "") : "0"));
    }
    root.append(svg("line", { x1: L, y1: T, x2: L, y2: T + ph, class: "axis" }));
    root.append(svg("text", { x: L, y: H - 5 }, `−${fmtWindow()}`));
    root.append(svg("text", { x: L + pw / 2, y: H - 5, "text-anchor": "middle" }, `last ${fmtWindow()}`));
    root.append(svg("text", { x: W - R, y: H - 5, "text-anchor": "end" }, "now"));
    if (!usable.length) {
      root.append(svg("text", { x: L + pw / 2, y: T + ph / 2, "text-anchor": "middle", class: "msg" }, emptyText));
    }
    const yOf = (v) => T + ph - (Math.max(0, v) / max) * ph;
    for (const s of usable) {
      const n = s.points.length;
      for (const run of runs(s.points)) {
        const pts = run.map((i) => [xAt(i, n, L, pw), yOf(s.points[i].v)]);
        const path = pts.map(([x, y], j) => `${j ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join("");
        if (s.area && pts.length > 1) {
          const base = (T + ph).toFixed(1);
          root.append(svg("path", { d: `${path}L${pts[pts.length - 1][0].toFixed(1)},${base}L${pts[0][0].toFixed(1)},${base}Z`, class: "area" }));
        }
        if (pts.length === 1) root.append(svg("circle", { cx: pts[0][0].toFixed(1), cy: pts[0][1].toFixed(1), r: 1.5, class: `line s${s.color}` }));
        else root.append(svg("path", { d: path, class: `line s${s.color}` }));
      }
    }
    box.replaceChildren(root);
  }

  function sparkline(points) {
    const W = 84, H = 18;
    const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "IDs/s trend" });
    const max = Math.max(1, ...points.map((p) => p.v));
    if (points.length >= 2) {
      for (const run of runs(points)) {
        if (run.length < 2) continue;
        const d = run.map((i, j) => {
          const x = xAt(i, points.length, 0, W);
          return `${j ? "L" : "M"}${x.toFixed(1)},${(H - 1.5 - (points[i].v / max) * (H - 3)).toFixed(1)}`;
        }).join("");
        root.append(svg("path", { d, class: "line" }));
      }
    }
    root.append(svg("title", {}, points.length ? `IDs/s over the last ${fmtWindow()}: now ${fmtRate(points[points.length - 1].v)}, peak ${fmtRate(max)}` : "waiting for two samples"));
    return root;
  }

  function renderCharts(d, c, replication) {
    const last = hist.ids.length ? hist.ids[hist.ids.length - 1].v : null;
    set("ids-now", last === null ? "" : `${fmtCompact(last)} IDs/s now`);
    lineChart($("chart-ids").querySelector(".chart"), [{ points: hist.ids, area: true, color: 0 }],
      "waiting for a second sample…", "IDs per second served by this node");
    const lagBox = $("chart-lag");
    const legend = lagBox.querySelector(".legend");
    const series = [...hist.lag.entries()].sort((a, b) => a[0] - b[0])
      .map(([id, points]) => ({ id, points, color: colorOf(id) }));
    let empty = "waiting for a second sample…";
    if (!replication) empty = `node ${d.node_id} is not the leader: see the leader's dashboard` + (has(c.leader_id) ? ` (node ${c.leader_id})` : "");
    else if (!series.length) empty = "no followers";
    lineChart(lagBox.querySelector(".chart"), series, empty, "replication lag per follower");
    legend.replaceChildren(...series.map((s) => {
      const item = el("span");
      const lastLag = s.points.length ? s.points[s.points.length - 1].v : null;
      item.append(el("span", null, `sw s${s.color}`), document.createTextNode(`node ${s.id}: ${fmtInt(lastLag)}`));
      return item;
    }));
  }

  // ---- controls ----
  function start() {
    set("refresh-secs", refreshSecs);
    $("tag-search").value = tagPrefix;
    showToken();
    const pause = $("pause");
    pause.addEventListener("click", () => {
      paused = !paused;
      pause.textContent = paused ? "Resume" : "Pause";
      pause.setAttribute("aria-pressed", String(paused));
      if (!paused) poll();
    });
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = $("token");
      const v = input.value.trim();
      if (v) token.set(v);
      input.value = "";
      showToken();
      poll(true);
    });
    // The same page opened again with a #token= (no reload): take it.
    window.addEventListener("hashchange", () => {
      if (tokenFromFragment()) { showToken(); poll(true); }
    });
    $("tag-search").addEventListener("input", searchChanged);
    $("forget").addEventListener("click", () => {
      token.clear();
      $("token").value = "";
      showToken();
      poll(true);
    });
    lineChart($("chart-ids").querySelector(".chart"), [], "waiting for data…", "IDs per second served by this node");
    lineChart($("chart-lag").querySelector(".chart"), [], "waiting for data…", "replication lag per follower");
    poll();
    setInterval(() => poll(), refreshSecs * 1000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
