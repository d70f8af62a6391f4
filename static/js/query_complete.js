// Autocomplete for the trials query language's box: field names, operators, values, and/or.
// The server says what may come next at the cursor (trials/queries/suggest.py); this only shows
// the list and puts the chosen text in. Keys: Down/Up move, Enter or Tab choose, Esc closes.
// Everything shown goes in as text (textContent), never as markup: values come from imported runs.
// (djangoql's own completion.js is not used: it needs a <textarea>, writes values into innerHTML
// unescaped, and offers no values inside `in (…)`; its lexer is used on the server instead.)
(function () {
  "use strict";
  const script = document.currentScript;
  const url = script.dataset.url;
  const DELAY = 120; // ms after the last keystroke: one request per pause, not per key

  function attach(input, n) {
    const list = document.createElement("ul");
    list.id = "query-suggestions-" + n;
    list.className = "query-suggestions";
    list.setAttribute("role", "listbox");
    list.hidden = true;
    const wrap = document.createElement("span");
    wrap.className = "query-complete";
    input.parentNode.insertBefore(wrap, input);
    wrap.appendChild(input);
    wrap.appendChild(list);
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("autocomplete", "off");

    let items = [];
    let prefix = "";
    let active = -1;
    let timer = null;
    let pending = null;

    function stop() { // no list to come: the one asked for would reopen what was closed
      clearTimeout(timer);
      if (pending) pending.abort();
    }

    function close() {
      list.hidden = true;
      items = [];
      active = -1;
      input.setAttribute("aria-expanded", "false");
      input.removeAttribute("aria-activedescendant");
    }

    function highlight(index) {
      active = index;
      list.querySelectorAll("li").forEach(function (li, i) {
        li.setAttribute("aria-selected", i === index ? "true" : "false");
        if (i === index) {
          li.scrollIntoView({ block: "nearest" });
          input.setAttribute("aria-activedescendant", li.id);
        }
      });
      if (index < 0) input.removeAttribute("aria-activedescendant");
    }

    function show(answer) {
      items = answer.items || [];
      prefix = answer.prefix || "";
      list.replaceChildren();
      if (!items.length) return close();
      items.forEach(function (item, i) {
        const li = document.createElement("li");
        li.id = list.id + "-" + i;
        li.setAttribute("role", "option");
        const label = document.createElement("span");
        label.className = "label";
        label.textContent = item.label;
        li.appendChild(label);
        if (item.hint) {
          const hint = document.createElement("span");
          hint.className = "hint";
          hint.textContent = item.hint;
          li.appendChild(hint);
        }
        li.addEventListener("mousedown", function (event) {
          event.preventDefault(); // keep the focus in the box
          choose(i);
        });
        list.appendChild(li);
      });
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
      highlight(-1);
    }

    function fetchNow() {
      if (pending) pending.abort();
      pending = new AbortController();
      const before = input.value.slice(0, input.selectionStart);
      fetch(url + "?q=" + encodeURIComponent(before), { signal: pending.signal, credentials: "same-origin" })
        .then(function (response) { return response.ok ? response.json() : { items: [] }; })
        .then(function (answer) { if (document.activeElement === input) show(answer); })
        .catch(function () { /* aborted by the next keystroke, or offline: no list */ });
    }

    function later() {
      clearTimeout(timer);
      timer = setTimeout(fetchNow, DELAY);
    }

    function choose(index) {
      const item = items[index];
      if (!item) return;
      const cursor = input.selectionStart;
      const start = Math.max(0, cursor - prefix.length);
      input.value = input.value.slice(0, start) + item.insert + input.value.slice(cursor);
      const at = start + item.insert.length;
      input.setSelectionRange(at, at);
      close();
      fetchNow(); // what may follow the chosen text
    }

    input.addEventListener("input", later);
    input.addEventListener("focus", later);
    input.addEventListener("click", later); // the cursor moved: what fits there now
    input.addEventListener("blur", function () { stop(); close(); });
    input.addEventListener("keydown", function (event) {
      const open = !list.hidden && items.length > 0;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (!open) { fetchNow(); event.preventDefault(); return; }
        const step = event.key === "ArrowDown" ? 1 : -1;
        let next = active + step; // -1: none chosen, the text as typed
        if (next >= items.length) next = -1;
        if (next < -1) next = items.length - 1;
        highlight(next);
        event.preventDefault();
      } else if ((event.key === "Enter" || event.key === "Tab") && open && active >= 0) {
        event.preventDefault(); // choose, not submit nor leave
        choose(active);
      } else if (event.key === "Escape") {
        if (open) event.preventDefault();
        stop();
        close();
      } else if (event.key === "Enter") {
        stop(); // the form is sent as typed
      }
    });
  }

  document.querySelectorAll(script.dataset.inputs).forEach(attach);
})();
