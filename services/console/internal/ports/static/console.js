// The console's only script, plain and small: it refreshes the parts of a
// page marked data-refresh, and sends the forms marked data-json as JSON
// (the console, like every service, accepts a change as JSON from its own
// origin only), after asking the question in data-confirm.
"use strict";

function refresh(el) {
  const every = parseInt(el.dataset.every || "2000", 10);
  const url = new URL(el.dataset.refresh, window.location.href);
  const tick = async () => {
    // Not while the user types in it or a request of its page is out: a
    // refresh would take the form from under them.
    const typing = el.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
    if (!document.hidden && !typing && !document.body.dataset.busy) {
      try {
        const res = await fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
        if (res.ok) {
          el.innerHTML = await res.text();
          el.dispatchEvent(new CustomEvent("console:refreshed", { bubbles: true }));
        }
      } catch (e) {
        // The next tick tries again; a service being restarted is normal here.
      }
    }
    setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

async function sendJSON(form) {
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    return;
  }
  const body = {};
  for (const [k, v] of new FormData(form).entries()) {
    body[k] = /^-?\d+$/.test(v) && form.elements[k] && form.elements[k].type === "number" ? parseInt(v, 10) : v;
  }
  // A log outside the refreshed part of the page keeps every answer.
  const log = document.getElementById(form.dataset.target || "");
  let out = form.querySelector(".result");
  if (log) {
    out = document.createElement("div");
    out.className = "result";
    log.prepend(out);
  }
  const button = form.querySelector("button");
  if (button) button.disabled = true;
  document.body.dataset.busy = "1";
  try {
    const res = await fetch(form.action, {
      method: (form.getAttribute("method") || "post").toUpperCase(),
      headers: { "Content-Type": "application/json", "Accept": "text/html" },
      credentials: "same-origin",
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (out) {
      out.innerHTML = text;
      out.dataset.status = String(res.status);
    }
  } catch (e) {
    if (out) out.textContent = "The console did not answer: " + e;
  } finally {
    if (button) button.disabled = false;
    delete document.body.dataset.busy;
  }
}

document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (form instanceof HTMLFormElement && form.dataset.json !== undefined) {
    ev.preventDefault();
    sendJSON(form);
  }
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refresh);
});
