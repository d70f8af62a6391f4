// The trial page: step filters, "show all" loaded on demand, copy link, arrow keys between
// trials, search-match jumping and highlighting, bar widths from data-* attributes.
// Everything an agent wrote is inserted with textContent only: it never becomes HTML.
(function () {
  "use strict";
  const root = document.getElementById("trial");
  if (!root) return;

  // --- bar widths (no inline style attributes in the HTML, for a strict CSP)
  document.querySelectorAll("[data-grow]").forEach((el) => { el.style.flexGrow = el.dataset.grow; });
  document.querySelectorAll("[data-width]").forEach((el) => { el.style.width = el.dataset.width + "%"; });
  document.querySelectorAll("[data-left]").forEach((el) => { el.style.left = el.dataset.left + "%"; });

  // --- the details panel (refs, ids, completeness) opens from the evidence badge or a link to it
  const details = document.getElementById("trial-details");
  function openDetails(hash) {
    const inside = ["#trial-details", "#trial-about", "#trial-refs", "#completeness"];
    if (details && inside.includes(hash)) details.open = true;
  }
  openDetails(window.location.hash);
  window.addEventListener("hashchange", () => openDetails(window.location.hash));
  document.querySelectorAll('a[href="#trial-details"]').forEach((a) => {
    a.addEventListener("click", () => { if (details) details.open = true; });
  });

  // --- keep a URL parameter in sync without reloading
  function setParam(name, value) {
    const url = new URL(window.location.href);
    if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
    history.replaceState(null, "", url);
    // pagination and tab links carry the same value
    document.querySelectorAll(".steps-pagination a, .tabs a").forEach((a) => {
      const link = new URL(a.href);
      if (value) link.searchParams.set(name, value); else link.searchParams.delete(name);
      a.href = link.toString();
    });
  }

  // --- filters: show / hide tool calls, reasoning, messages, system steps, copied context
  const steps = document.getElementById("steps");
  const toggles = document.querySelectorAll("#step-filters input[data-hide]");
  toggles.forEach((box) => {
    box.addEventListener("change", () => {
      steps.classList.toggle("hide-" + box.dataset.hide, !box.checked);
      const hidden = Array.from(toggles).filter((b) => !b.checked).map((b) => b.dataset.hide);
      setParam("hide", hidden.join(","));
    });
  });

  // --- expand / collapse
  // Collapse all folds every long block (a system prompt, a message, a file's content, a result)
  // to its first lines; a click on a folded block opens it again.
  function setAllOpen(open) {
    document.querySelectorAll("#steps details").forEach((d) => { d.open = open; });
    document.querySelectorAll("#steps pre.observation").forEach((p) => p.classList.toggle("open", open));
    document.querySelectorAll("#steps pre").forEach((p) => {
      p.classList.toggle("folded", !open && p.scrollHeight > FOLDED_HEIGHT);
    });
  }
  const FOLDED_HEIGHT = 80;
  document.addEventListener("click", (event) => {
    const folded = event.target.closest("#steps pre.folded");
    if (folded) folded.classList.remove("folded");
  });
  const expandAll = document.getElementById("expand-all");
  const collapseAll = document.getElementById("collapse-all");
  if (expandAll) expandAll.addEventListener("click", () => setAllOpen(true));
  if (collapseAll) collapseAll.addEventListener("click", () => setAllOpen(false));

  // --- "show all" is static/js/show_all.js (loaded first: its buttons are clicked below); a search
  // match in the text it shows is highlighted here
  document.addEventListener("step-text-shown", (event) => { if (query) highlight(event.target); });

  // --- copy a step's permanent link
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy-link");
    if (!button) return;
    const url = new URL(button.dataset.url, window.location.origin).toString();
    try {
      await navigator.clipboard.writeText(url);
      button.textContent = "copied";
    } catch (err) {
      window.prompt("Link to this step:", url);
    }
    button.dataset.copied = url;
    setTimeout(() => { button.textContent = "copy link"; }, 1500);
  });

  // --- a deep link (/steps/<n>/ or #step-n) opens scrolled to the step, highlighted
  function focusStep(number) {
    const el = document.getElementById("step-" + number);
    if (!el) return false;
    document.querySelectorAll("article.step.focused").forEach((s) => s.classList.remove("focused"));
    el.classList.add("focused");
    el.scrollIntoView({ block: "start" });
    return true;
  }
  const hashMatch = /^#step-(\d+)$/.exec(window.location.hash);
  if (hashMatch) focusStep(hashMatch[1]);
  else if (root.dataset.focus) focusStep(root.dataset.focus);
  window.addEventListener("hashchange", () => {
    const m = /^#step-(\d+)$/.exec(window.location.hash);
    if (m) focusStep(m[1]);
  });

  // --- the timeline: a segment of this trajectory's window focuses its step; others open its window
  document.querySelectorAll("#timeline a.seg").forEach((a) => {
    a.addEventListener("click", (event) => {
      if (a.dataset.trajectory !== root.dataset.trajectory || !document.getElementById("step-" + a.dataset.number)) return;
      event.preventDefault();
      history.replaceState(null, "", "#step-" + a.dataset.number);
      focusStep(a.dataset.number);
    });
  });

  // --- highlight search matches in the loaded steps (DOM text nodes only, never HTML)
  const query = (root.dataset.query || "").toLowerCase();
  function highlight(container) {
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    const hits = [];
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (node.parentElement.closest("button, header")) continue;
      if (node.nodeValue.toLowerCase().includes(query)) hits.push(node);
    }
    hits.forEach((node) => {
      const text = node.nodeValue;
      const lower = text.toLowerCase();
      const frag = document.createDocumentFragment();
      let at = 0;
      let i = lower.indexOf(query);
      while (i !== -1) {
        frag.appendChild(document.createTextNode(text.slice(at, i)));
        const mark = document.createElement("mark");
        mark.textContent = text.slice(i, i + query.length);
        frag.appendChild(mark);
        at = i + query.length;
        i = lower.indexOf(query, at);
      }
      frag.appendChild(document.createTextNode(text.slice(at)));
      node.parentNode.replaceChild(frag, node);
    });
  }
  if (query && steps) {
    highlight(steps);
    // A match past a preview's cut: open the focused step's long parts, so the match shows.
    const focused = document.querySelector("article.step.focused");
    if (focused && !focused.querySelector("mark")) {
      focused.querySelectorAll("button.expand").forEach((button) => button.click());
    }
  }

  // --- jump between search matches (they may be on other pages: follow their links)
  const matchLinks = Array.from(document.querySelectorAll("#search-results a.match"));
  function currentNumber() {
    const focused = document.querySelector("article.step.focused");
    return focused ? Number(focused.dataset.number) : 0;
  }
  function jump(direction) {
    if (!matchLinks.length) return;
    const here = currentNumber();
    const trajectory = root.dataset.trajectory;
    const ordered = direction > 0 ? matchLinks : matchLinks.slice().reverse();
    const target = ordered.find((a) => {
      const n = Number(a.dataset.number);
      if (a.dataset.trajectory !== trajectory) return false;
      return direction > 0 ? n > here : n < here;
    }) || ordered[0];
    const n = Number(target.dataset.number);
    if (target.dataset.trajectory === trajectory && document.getElementById("step-" + n)) {
      history.replaceState(null, "", "#step-" + n);
      focusStep(n);
    } else {
      window.location.href = target.href;
    }
  }
  const nextMatch = document.getElementById("next-match");
  const prevMatch = document.getElementById("prev-match");
  if (nextMatch) nextMatch.addEventListener("click", () => jump(1));
  if (prevMatch) prevMatch.addEventListener("click", () => jump(-1));

  // --- j / k: the next / previous step of the window gets the focus and its permalink the URL;
  // past either end of the window, the next / previous window opens on its first / last step.
  function moveStep(delta) {
    const steps = Array.from(document.querySelectorAll("#steps article.step")).filter((el) => el.offsetParent !== null);
    if (!steps.length) return;
    const current = steps.findIndex((el) => el.classList.contains("focused"));
    const next = current === -1 ? (delta > 0 ? 0 : steps.length - 1) : current + delta;
    if (next < 0 || next >= steps.length) {
      const pager = document.querySelector('.steps-pagination a[rel="' + (delta > 0 ? "next" : "prev") + '"]');
      if (pager) window.location.href = pager.href.split("#")[0] + "#step-" + pager.dataset.step;
      return;
    }
    steps.forEach((el) => el.classList.remove("focused"));
    const step = steps[next];
    step.classList.add("focused");
    step.setAttribute("tabindex", "-1");
    step.focus({ preventScroll: true });
    step.scrollIntoView({ block: "start" });
    history.replaceState(null, "", "#" + step.id);
  }

  // --- arriving from the previous / next trial (#steps): the first step has the focus, not the page top
  function landOnSteps() {
    const first = Array.from(document.querySelectorAll("#steps article.step")).find((el) => el.offsetParent !== null);
    if (!first) return;
    focusStep(first.dataset.number);
    first.setAttribute("tabindex", "-1");
    first.focus({ preventScroll: true });
  }
  // (after the browser's own scroll to #steps, which would take the focus back)
  if (window.location.hash === "#steps") window.addEventListener("load", () => setTimeout(landOnSteps, 0));

  // --- tabs: [ / ] or ⌥← / ⌥→ open the previous / next tab, on its panel
  function switchTab(delta) {
    const tabs = Array.from(document.querySelectorAll(".tabs a[data-tab]"));
    const here = tabs.findIndex((a) => a.classList.contains("active"));
    const target = tabs[(here + delta + tabs.length) % tabs.length];
    if (target) window.location.href = target.href.split("#")[0] + (target.dataset.tab === "trajectory" ? "#steps" : "#tab-" + target.dataset.tab);
  }

  // --- ? shows every shortcut; Esc closes it (the dialog's own key)
  const help = document.getElementById("key-help");
  function toggleHelp() {
    if (!help) return;
    if (help.open) help.close(); else help.showModal();
  }
  document.querySelectorAll("[data-opens=key-help]").forEach((b) => b.addEventListener("click", toggleHelp));

  // --- "compare with…" floats over the tabs: a click elsewhere or Esc folds it away
  const compareWith = document.getElementById("compare-with");
  if (compareWith) {
    document.addEventListener("click", (event) => {
      if (compareWith.open && !compareWith.contains(event.target)) compareWith.open = false;
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && compareWith.open) compareWith.open = false;
    });
  }

  // --- keyboard: ← / → between trials (keeping the tab), j / k between steps, / to search,
  // n / N between search matches, [ / ] between tabs, ? for the list of keys
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey) return;
    const target = event.target;
    // A focused widget keeps its keys: a form field, a terminal recording's player (→ seeks there), media.
    if (target.closest("input, textarea, select, [contenteditable], .cast-player, [role=application], [role=slider], video, audio")) return;
    if (event.altKey) {
      if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
        event.preventDefault();
        switchTab(event.key === "ArrowRight" ? 1 : -1);
      }
      return;
    }
    if (help && help.open && event.key !== "?") return;
    if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
      // Not while the reader has clicked into the trajectory: there the arrows move through the text.
      const caret = document.getSelection();
      if (caret && caret.anchorNode && caret.anchorNode.parentElement?.closest(".steps")) return;
      const link = document.querySelector('.trial-nav a[data-key="' + event.key + '"]');
      if (link) {
        event.preventDefault();
        window.location.href = link.href;
      }
    } else if (event.key === "j" || event.key === "k") {
      event.preventDefault();
      moveStep(event.key === "j" ? 1 : -1);
    } else if (event.key === "[" || event.key === "]") {
      event.preventDefault();
      switchTab(event.key === "]" ? 1 : -1);
    } else if (event.key === "?") {
      event.preventDefault();
      toggleHelp();
    } else if (event.key === "/") {
      const search = document.querySelector('.toolbar input[type="search"]');
      if (search) {
        event.preventDefault();
        search.focus();
      }
    } else if (event.key === "n" && matchLinks.length) {
      jump(1);
    } else if (event.key === "N" && matchLinks.length) {
      jump(-1);
    }
  });
  document.documentElement.dataset.keys = "on"; // (the keys answer from here: a test waits for it)
})();
