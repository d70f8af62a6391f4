// Polls the import's API resource while it runs and redraws the progress and tables.
// Every value is inserted as text: file names and messages come from untrusted packs.
(function () {
  const running = (status) => status === "queued" || status === "running";

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

  function cell(text) {
    const td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    return td;
  }

  function fill(tbodySelector, rows) {
    const tbody = document.querySelector(tbodySelector + " tbody");
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
    fill("#import-outcomes", data.outcomes.map((o) => [o.pack, o.kind, o.outcome, o.reason || (o.trials ? o.trials + " trials" : "")]));
    fill("#import-problems", data.problems.map((p) => [p.severity, p.file, (p.json_path || "") + (p.line ? " line " + p.line : ""), p.message, p.kept]));
    if (data.status === "queued" || data.status === "running") setTimeout(poll, 1000);
  }

  const status = document.getElementById("import-status").textContent;
  if (status === "queued" || status === "running") poll();
})();
