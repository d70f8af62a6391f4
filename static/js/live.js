// A running trial's page: ask for new steps every 2 s and add them to the live table.
// Reloads the page once the trial has finished, so its tabs show the whole trial.
(function () {
  "use strict";
  const panel = document.getElementById("live");
  if (!panel) return;
  const api = panel.dataset.liveApi;
  const body = panel.querySelector("#live-steps tbody");
  const stepBase = panel.dataset.stepUrl.replace(/0\/$/, ""); // + number + "/": the step's permalink
  const KEEP = 500; // rows kept in the table: the trajectory tab has them all
  let after = 0; // the last step number shown
  let status = "running";

  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text; // untrusted text: never parsed as HTML
    row.appendChild(td);
  }

  function show(data) {
    document.getElementById("live-step-count").textContent = data.step_count;
    document.getElementById("live-event-count").textContent = data.event_count;
    // the one date-time format of every page (the `when` filter; the site's zone is UTC)
    if (data.last_seen)
      document.getElementById("live-seen").textContent = new Date(data.last_seen).toISOString().slice(0, 19).replace("T", " ") + " UTC";
    const badge = document.getElementById("live-status");
    const label = data.status !== "running" ? data.status : data.stalled ? "stalled" : "running";
    badge.textContent = label;
    badge.className = "badge " + label;
    const header = document.getElementById("trial-status"); // the page title's badge says the same
    if (header) {
      header.textContent = label;
      header.className = "badge " + label;
    }
    const stalled = document.getElementById("header-stalled"); // and the header's, beside "running"
    if (stalled) stalled.hidden = label !== "stalled";
    for (const step of data.steps) {
      const row = document.createElement("tr");
      row.dataset.step = step.number;
      const link = document.createElement("a");
      link.href = stepBase + step.number + "/";
      link.textContent = step.number;
      row.appendChild(document.createElement("td")).appendChild(link);
      cell(row, step.source);
      cell(row, step.message);
      cell(row, step.tool_calls || "");
      body.appendChild(row);
      after = Math.max(after, step.number);
    }
    while (body.rows.length > KEEP) body.deleteRow(0);
    const scroller = panel.querySelector(".live-scroll");
    if (data.steps.length && scroller) scroller.scrollTop = scroller.scrollHeight; // follow the newest
  }

  async function poll() {
    let again = 2000; // at most one request every 2 s
    try {
      const response = await fetch(api + "?after=" + after, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const data = await response.json();
        show(data);
        if (data.status !== "running" && status === "running") {
          window.location.reload();
          return;
        }
        status = data.status;
      }
    } catch (err) {
      again = 5000; // the server is away: try again a little later
    }
    window.setTimeout(poll, again);
  }
  poll();
})();
