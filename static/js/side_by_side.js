// The side-by-side page: opens at the first divergence, unfolds identical runs, and walks the
// pairs with the keyboard (j/k every pair, n/N the pairs that differ, o unfold, Enter open).
(function () {
  "use strict";
  const table = document.getElementById("pairs");
  if (!table) return;

  function unfold(head) {
    const run = head.nextElementSibling;
    if (run) run.hidden = false;
    head.remove();
  }
  table.querySelectorAll("tbody.fold-head button.unfold").forEach((button) => {
    button.addEventListener("click", () => unfold(button.closest("tbody")));
  });

  const visible = () => Array.from(table.querySelectorAll("tr.pair")).filter((tr) => !tr.closest("tbody").hidden);
  let current = null;
  function focusRow(row) {
    if (!row) return;
    if (current) current.classList.remove("current");
    current = row;
    row.classList.add("current");
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "center" });
  }
  function move(step, differing) {
    const rows = visible().filter((tr) => !differing || !tr.classList.contains("status-same"));
    const all = visible();
    const at = current ? all.indexOf(current) : -1;
    const candidates = step > 0 ? rows.filter((tr) => all.indexOf(tr) > at) : rows.filter((tr) => all.indexOf(tr) < at).reverse();
    if (candidates.length) focusRow(candidates[0]);
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest("input, textarea, select")) return;
    const keys = {
      j: () => move(1, false),
      k: () => move(-1, false),
      n: () => move(1, true),
      N: () => move(-1, true),
      o: () => { const head = table.querySelector("tbody.fold-head"); if (head) unfold(head); },
      Enter: () => { const link = current && current.querySelector("td.num a"); if (link) window.location.href = link.href; },
    };
    if (keys[event.key]) { event.preventDefault(); keys[event.key](); }
  });

  // Open at the first divergence (unless the address names another place).
  const divergence = document.getElementById("first-divergence");
  if (!window.location.hash && divergence) focusRow(divergence);
  else if (window.location.hash === "#first-divergence" && divergence) focusRow(divergence);
})();
