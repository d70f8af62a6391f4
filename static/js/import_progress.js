// Polls the import's API resource while it runs and redraws the progress and tables.
// Every value is inserted as text: file names and messages come from untrusted packs.
(function () {
  const running = (status) => status === "queued" || status === "running";

  // "done" says the import finished, not that every pack got in: rejections get a badge of their own.
  function showRejected(badge, n) {
    badge.textContent = n + " rejected";
    badge.hidden = !n;
  }

  // The imports list: each row still queued or running polls its own import.
  document.querySelectorAll("tr.import-row").forEach((row) => {
    const badge = row.querySelector('[data-field="status"]');
    const count = row.querySelector('[data-field="count"]');
    const bar = row.querySelector("progress");
    async function pollRow() {
      const response = await fetch(row.dataset.statusUrl, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const data = await response.json();
      badge.textContent = data.status;
      badge.className = "badge " + data.status;
      showRejected(row.querySelector('[data-field="rejected"]'), data.rejected_count);
      row.querySelector('[data-field="nothing-new"]').hidden = !data.nothing_new;
      count.textContent = data.progress_done + " / " + data.progress_total;
      bar.max = Math.max(data.progress_total, 1);
      bar.value = data.progress_done;
      if (running(data.status)) setTimeout(pollRow, 1000);
    }
    if (running(badge.textContent)) pollRow();
  });

  const root = document.getElementById("import");
  if (!root) return;
  const url = root.dataset.statusUrl;

  // A value, {badge: text} for one drawn as a badge (its class is the text, slugged),
  // or {href, text} for a link.
  function cell(value) {
    const td = document.createElement("td");
    if (value != null && value.href != null) {
      const a = document.createElement("a");
      a.href = value.href;
      a.textContent = value.text;
      td.appendChild(a);
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

  async function poll() {
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const data = await response.json();
    document.getElementById("import-status").textContent = data.status;
    document.getElementById("import-status").className = "badge " + data.status;
    document.getElementById("import-count").textContent = data.progress_done + " / " + data.progress_total;
    const bar = document.getElementById("import-progress");
    bar.max = Math.max(data.progress_total, 1);
    bar.value = data.progress_done;
    showRejected(document.getElementById("import-rejected"), data.rejected_count);
    document.getElementById("import-nothing-new").hidden = !data.nothing_new;  // a re-import, told apart
    const trialsList = document.getElementById("import-trials");
    const details = (o) => {
      if (o.reason || !o.trials) return o.reason || "";
      const text = o.trials + (o.trials === 1 ? " trial" : " trials");
      return o.pack_id ? { href: trialsList.querySelector("a").pathname + "?pack=" + o.pack_id, text } : text;
    };
    fill("#import-outcomes", data.outcomes.map((o) => [o.pack, o.kind, { badge: o.outcome }, details(o)]), 4);
    const hasTrials = data.outcomes.some((o) => o.trials || o.already || o.joined);
    trialsList.hidden = data.status !== "done" || !hasTrials;  // a wholly rejected upload has none to list
    fill("#import-problems", data.problems.map((p) => [{ badge: p.severity }, p.file, (p.json_path || "") + (p.line ? " line " + p.line : ""), p.message, p.kept]), 5);
    if (data.status === "queued" || data.status === "running") setTimeout(poll, 1000);
  }

  const status = document.getElementById("import-status").textContent;
  if (status === "queued" || status === "running") poll();
})();
