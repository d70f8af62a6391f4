// Polls the import's API resource while it runs and redraws the progress and tables.
// Every value is inserted as text: file names and messages come from untrusted packs.
(function () {
  const running = (status) => status === "queued" || status === "running";

  // "done" says the import finished, not that every pack got in: rejections get a badge of their own.
  function showRejected(badge, n) {
    badge.textContent = n + " rejected";
    badge.hidden = !n;
  }

  // Status, badges and progress, the same on a row of the list and on an import's page.
  function drawSummary(el, data) {
    el.status.textContent = data.status;
    el.status.className = "badge " + data.status;
    showRejected(el.rejected, data.rejected_count);
    el.nothingNew.hidden = !data.nothing_new; // a re-import, told apart from the first one
    el.count.textContent = data.progress_done + " / " + data.progress_total;
    el.bar.max = Math.max(data.progress_total, 1);
    el.bar.value = data.progress_done;
  }

  // Fetches the import's resource and hands it to `draw`, again every second while it runs.
  function follow(url, draw) {
    async function poll() {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const data = await response.json();
      draw(data);
      if (running(data.status)) setTimeout(poll, 1000);
    }
    poll();
  }

  // The imports list: each row still queued or running polls its own import.
  document.querySelectorAll("tr.import-row").forEach((row) => {
    const field = (name) => row.querySelector(`[data-field="${name}"]`);
    const el = { status: field("status"), rejected: field("rejected"), nothingNew: field("nothing-new"),
                 count: field("count"), bar: row.querySelector("progress") };
    if (running(el.status.textContent)) follow(row.dataset.statusUrl, (data) => drawSummary(el, data));
  });

  const root = document.getElementById("import");
  if (!root) return;
  const url = root.dataset.statusUrl;

  // A value, {badge: text} for one drawn as a badge (its class is the text, slugged),
  // or {href, text, after} for a link (and text after it).
  function cell(value) {
    const td = document.createElement("td");
    if (value != null && value.href != null) {
      const a = document.createElement("a");
      a.href = value.href;
      a.textContent = value.text;
      td.appendChild(a);
      if (value.after) td.appendChild(document.createTextNode(" · " + value.after));
      return td;
    }
    const text = value != null && value.badge != null ? value.badge : value;
    const target = value != null && value.badge != null ? document.createElement("span") : td;
    target.textContent = text == null ? "" : String(text);
    if (target !== td) {
      target.className = "badge " + String(text).toLowerCase().replace(/[^a-z0-9]+/g, "-");
      td.appendChild(target);
    }
    return td;
  }

  function fill(tbodySelector, rows, columns) {
    const tbody = document.querySelector(tbodySelector + " tbody");
    if (!rows.length) {
      const td = cell("None.");
      td.colSpan = columns;
      const tr = document.createElement("tr");
      tr.appendChild(td);
      tbody.replaceChildren(tr);
      return;
    }
    tbody.replaceChildren(...rows.map((values) => {
      const tr = document.createElement("tr");
      values.forEach((v) => tr.appendChild(cell(v)));
      return tr;
    }));
  }

  const byId = (id) => document.getElementById(id);
  const summary = { status: byId("import-status"), rejected: byId("import-rejected"),
                    nothingNew: byId("import-nothing-new"), count: byId("import-count"), bar: byId("import-progress") };

  function draw(data) {
    drawSummary(summary, data);
    const trialsList = byId("import-trials");
    const details = (o) => {  // as the page draws it: the reason or the trials, then the other counts
      const counts = o.details || "";
      if (o.reason || !o.trials) return [o.reason, counts].filter(Boolean).join(" · ");
      const text = o.trials + (o.trials === 1 ? " trial" : " trials");
      if (!o.pack_id) return [text, counts].filter(Boolean).join(" · ");
      return { href: trialsList.querySelector("a").pathname + "?pack=" + o.pack_id, text, after: counts };
    };
    fill("#import-outcomes", data.outcomes.map((o) => [o.pack, o.kind, { badge: o.outcome }, details(o)]), 4);
    trialsList.hidden = data.status !== "done" || !data.has_trials; // a wholly rejected upload has none to list
    byId("import-worker-gone").hidden = !data.worker_gone;
    fill("#import-problems", data.problems.map((p) => [{ badge: p.severity }, p.file, (p.json_path || "") + (p.line ? " line " + p.line : ""), p.message, p.kept]), 5);
  }

  if (running(summary.status.textContent)) follow(url, draw);
})();
