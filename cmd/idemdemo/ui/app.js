// The idemkit demo page. Plain script, no dependencies: it keeps the order
// list live, carries the "slow server" toggle into the forms, and runs the
// two JavaScript variants (Idempotency-Key and the dedup window).
"use strict";

const PENDING = "idemdemo.pending"; // the Idempotency-Key submission not yet answered
const SLOW = "idemdemo.slow";
const MAX_ATTEMPTS = 8;

const $ = (sel) => document.querySelector(sel);
const slowMillis = () => Number(document.body.dataset.slowMs || 0);
const isSlow = () => sessionStorage.getItem(SLOW) === "1";

function now() {
  return new Date().toISOString().slice(11, 23);
}

// log appends a line to one of the JavaScript variants' logs.
function log(list, cls, text) {
  const li = document.createElement("li");
  li.className = cls;
  li.textContent = now() + "  " + text;
  list.append(li);
  while (list.children.length > 40) list.firstElementChild.remove();
}

// refreshOrders shows the caller's orders (GET /orders).
async function refreshOrders() {
  const count = $("#order-count");
  if (!count) return;
  try {
    const res = await fetch("/orders", { cache: "no-store" });
    if (!res.ok) return;
    const orders = await res.json();
    count.textContent = String(orders.length);
    const list = $("#order-list");
    if (!list) return;
    list.replaceChildren(...orders.slice(-12).reverse().map((o) => {
      const li = document.createElement("li");
      li.textContent = `#${o.id}  ${o.qty} × ${o.sku}`;
      return li;
    }));
    const bySku = {};
    for (const o of orders) bySku[o.sku] = (bySku[o.sku] || 0) + 1;
    for (const form of document.querySelectorAll("form")) {
      const sku = form.elements.sku.value;
      const out = form.closest("article").querySelector(".made");
      if (out) out.textContent = `${bySku[sku] || 0} order(s) of ${sku} so far`;
    }
  } catch {
    // the next refresh tries again
  }
}

// uuid is crypto.randomUUID, which needs a secure context (localhost is
// one), with a fallback for plain http on another address.
function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function orderBody(form) {
  return { sku: form.elements.sku.value, qty: Number(form.elements.qty.value) };
}

function jsonHeaders() {
  const h = { "Content-Type": "application/json" };
  if (isSlow()) h["X-Demo-Delay"] = slowMillis() + "ms";
  return h;
}

async function problemText(res) {
  try {
    const p = await res.json();
    return p.detail || p.title || res.statusText;
  } catch {
    return res.statusText;
  }
}

// Variant 3: one Idempotency-Key per logical submission. The key is minted
// on the first click, kept for every click and retry of the same order
// (and in sessionStorage, so a reload mid-flight resends it), and dropped
// when the form is edited.
function keyVariant() {
  const form = $("#key-form");
  const list = $("#key-log");
  const shown = $("#key-current");
  let key = null;

  const show = () => { shown.textContent = key ? key : "minted on the next click"; };

  async function send(sub, attempt) {
    log(list, "send", `sent, attempt ${attempt}`);
    let res;
    try {
      res = await fetch("/orders", {
        method: "POST",
        headers: { ...jsonHeaders(), "Idempotency-Key": sub.key },
        body: JSON.stringify(sub.body),
      });
    } catch {
      return retry(sub, attempt, 1, "network error");
    }
    if (res.ok) {
      const o = await res.json();
      const replayed = res.headers.get("Idempotent-Replayed") === "true";
      log(list, replayed ? "replay" : "ok",
        `${res.status} order #${o.id} ${replayed ? "replayed (not created again)" : "created"}`);
      done(sub);
    } else if (res.status === 409 || res.status >= 500) {
      const after = Number(res.headers.get("Retry-After") || 1);
      const why = res.status === 409 ? "409 still running" : `${res.status} ${await problemText(res)}`;
      return retry(sub, attempt, after, why);
    } else {
      log(list, "err", `${res.status} ${await problemText(res)}`);
      done(sub);
    }
    refreshOrders();
  }

  function retry(sub, attempt, afterSeconds, why) {
    if (attempt >= MAX_ATTEMPTS) {
      log(list, "err", `${why}; giving up after ${attempt} attempts`);
      return;
    }
    log(list, "wait", `${why}; retry in ${afterSeconds}s, same key`);
    setTimeout(() => send(sub, attempt + 1), afterSeconds * 1000);
  }

  function done(sub) {
    const p = JSON.parse(sessionStorage.getItem(PENDING) || "null");
    if (p && p.key === sub.key) sessionStorage.removeItem(PENDING);
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!key) key = uuid();
    show();
    const sub = { key, body: orderBody(form) };
    sessionStorage.setItem(PENDING, JSON.stringify(sub));
    send(sub, 1);
  });
  form.addEventListener("input", () => { key = null; show(); });

  // A reload while a submission was in flight: send it again, same key.
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  if (pending) {
    key = pending.key;
    form.elements.sku.value = pending.body.sku;
    form.elements.qty.value = pending.body.qty;
    log(list, "wait", "resuming the submission a reload interrupted, same key");
    send(pending, 1);
  }
  show();
}

// Variant 4: no key at all; the server's dedup window refuses repeats.
function windowVariant() {
  const form = $("#window-form");
  const list = $("#window-log");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    log(list, "send", "sent");
    let res;
    try {
      res = await fetch("/orders/quick", { method: "POST", headers: jsonHeaders(), body: JSON.stringify(orderBody(form)) });
    } catch {
      log(list, "err", "network error");
      return;
    }
    if (res.ok) {
      const o = await res.json();
      log(list, "ok", `${res.status} order #${o.id} created`);
    } else if (res.status === 409) {
      log(list, "dup", `409 duplicate refused (retry after ${res.headers.get("Retry-After")}s)`);
    } else {
      log(list, "err", `${res.status} ${await problemText(res)}`);
    }
    refreshOrders();
  });
}

// The slow toggle: kept per tab, copied into the HTML forms' hidden field.
function slowToggle() {
  const box = $("#slow");
  const sync = () => {
    box.checked = isSlow();
    for (const f of document.querySelectorAll('input[name="slow"]')) f.value = isSlow() ? "1" : "";
  };
  box.addEventListener("change", () => {
    sessionStorage.setItem(SLOW, box.checked ? "1" : "");
    sync();
  });
  window.addEventListener("pageshow", sync);
  sync();
}

// The result page of a form post shows whether it was replayed: the
// server marks a replay with a Server-Timing metric.
function resultPage() {
  const nav = performance.getEntriesByType("navigation")[0];
  const replayed = nav && (nav.serverTiming || []).some((t) => t.name === "idem-replayed");
  if (replayed) {
    $("#replayed").hidden = false;
    document.body.classList.add("was-replayed");
  }
}

function main() {
  for (const form of document.querySelectorAll("form")) {
    const made = document.createElement("p");
    made.className = "made";
    form.closest("article").append(made);
  }
  if (document.body.classList.contains("result")) resultPage();
  if ($("#slow")) slowToggle();
  if ($("#key-form")) keyVariant();
  if ($("#window-form")) windowVariant();
  refreshOrders();
  window.addEventListener("pageshow", refreshOrders);
  setInterval(refreshOrders, 1000);
  // Every handler is attached: what drives the page (the browser tests)
  // waits for this before it clicks.
  document.documentElement.dataset.ready = "true";
}

main();
