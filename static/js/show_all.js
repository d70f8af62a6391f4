// "show all": one step's full content, fetched on demand from the JSON the page names in
// `data-step-api` (the API for a signed-in user; a share's own for its visitor), `data-trajectory`
// its trajectory. Inserted with textContent only: what an agent wrote never becomes HTML.
(function () {
  "use strict";
  const root = document.querySelector("[data-step-api]");
  if (!root) return;
  const cache = new Map();
  function stepUrl(number) {
    const url = new URL(root.dataset.stepApi + number + "/", window.location.origin);
    if (root.dataset.trajectory) url.searchParams.set("t", root.dataset.trajectory);
    return url;
  }
  async function loadStep(number) {
    if (!cache.has(number)) {
      cache.set(number, fetch(stepUrl(number), { headers: { Accept: "application/json" } }).then((r) => {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      }));
    }
    return cache.get(number);
  }
  function fullText(detail, field, index, key, article) {
    if (field === "message") return detail.message;
    if (field === "reasoning") return detail.reasoning;
    const args = (detail.tool_calls[index] || {}).arguments;
    if (field === "argument") return args && typeof args[key] === "string" ? args[key] : "";
    if (field === "arguments") {
      // the arguments but the multi-line ones, which have their own text blocks
      const lifted = Array.from(article.querySelectorAll('pre[data-field="argument"][data-index="' + index + '"]')).map((p) => p.dataset.key);
      if (!lifted.length) return (detail.tool_calls[index] || {}).arguments_text || "";
      const rest = {};
      Object.keys(args || {}).forEach((k) => { if (!lifted.includes(k)) rest[k] = args[k]; });
      return JSON.stringify(rest, null, 2);
    }
    if (field === "observation") return (detail.observations[index] || {}).content || "";
    return "";
  }
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.expand");
    if (!button) return;
    const article = button.closest("article.step");
    const field = button.dataset.field;
    const index = Number(button.dataset.index || 0);
    const selector = 'pre[data-field="' + field + '"]' + (button.dataset.index !== undefined ? '[data-index="' + index + '"]' : "") +
      (button.dataset.key !== undefined ? '[data-key="' + CSS.escape(button.dataset.key) + '"]' : "");
    const pre = button.parentElement.querySelector(selector) || article.querySelector(selector);
    button.disabled = true;
    button.textContent = "loading…";
    try {
      const detail = await loadStep(Number(article.dataset.number));
      pre.textContent = fullText(detail, field, index, button.dataset.key, article);
      pre.dispatchEvent(new CustomEvent("step-text-shown", { bubbles: true }));
      pre.classList.remove("collapsed");
      pre.classList.add("open");
      button.remove();
    } catch (err) {
      button.disabled = false;
      button.textContent = "could not load (" + err.message + "), retry";
    }
  });

})();
