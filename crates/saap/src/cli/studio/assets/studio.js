// saap studio: keeps a live run's page current, and fills the send form's event type.
// Pages work without it.
"use strict";

function wireForms(root) {
  for (const select of root.querySelectorAll("form.send select.event-type")) {
    select.addEventListener("change", () => {
      const area = select.form.querySelector("textarea[name=event]");
      let fields = {};
      try { fields = JSON.parse(area.value); } catch (_) { /* start afresh */ }
      fields._event_name = select.value;
      area.value = JSON.stringify(fields);
    });
  }
}

// A live run's page listens to /runs/RUN/live and swaps in the page again when the run's
// journal grows; an open form or a typed text is left alone until it is sent.
function follow() {
  const section = document.getElementById("run");
  if (!section || section.dataset.live !== "true" || !window.EventSource) return;
  const run = section.dataset.run;
  const source = new EventSource(`/runs/${encodeURIComponent(run)}/live?entries=${section.dataset.entries}`);
  let busy = false;
  const refresh = async () => {
    if (busy) return;
    const active = document.activeElement;
    if (active && (active.tagName === "TEXTAREA" || active.tagName === "INPUT")) return;
    busy = true;
    try {
      const response = await fetch(location.pathname + location.search, { headers: { "Accept": "text/html" } });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = doc.getElementById("run");
      const current = document.getElementById("run");
      if (fresh && current) {
        // Keep what the reader opened.
        const open = new Set([...current.querySelectorAll("details[open]")].map(keyOf));
        current.replaceWith(fresh);
        for (const d of fresh.querySelectorAll("details")) if (open.has(keyOf(d))) d.open = true;
        wireForms(fresh);
        if (fresh.dataset.live !== "true") source.close();
      }
    } finally {
      busy = false;
    }
  };
  source.addEventListener("changed", refresh);
  source.addEventListener("ended", () => { refresh(); source.close(); });
}

function keyOf(details) {
  const row = details.closest("[id]");
  return (row ? row.id : "") + "|" + (details.dataset.step || "") + "|" + details.className;
}

document.addEventListener("DOMContentLoaded", () => {
  wireForms(document);
  follow();
});
