// Triage feedback form: show the fieldsets for the chosen kind, and "use" buttons that pick a
// similar failure mode. Without JavaScript every fieldset stays visible and the form still works.
(function () {
  "use strict";
  var form = document.getElementById("feedback-form") || document.getElementById("cluster-form");
  if (!form) return;

  function chosenKind() {
    var checked = form.querySelector('input[name="kind"]:checked');
    return checked ? checked.value : "";
  }

  function showKind() {
    var kind = chosenKind();
    form.querySelectorAll("fieldset.for-kind").forEach(function (fieldset) {
      var kinds = (fieldset.getAttribute("data-kind") || "").split(" ");
      fieldset.hidden = kind !== "" && kinds.indexOf(kind) === -1;
    });
    // Fields required for some kinds only: `required` (and their marker) when that kind is picked.
    form.querySelectorAll(".field[data-required-for]").forEach(function (field) {
      var needed = kind === "" || field.getAttribute("data-required-for").split(" ").indexOf(kind) !== -1;
      field.classList.toggle("not-required-now", !needed);
      field.querySelectorAll("input, select, textarea").forEach(function (input) {
        if (input.type !== "checkbox" && input.type !== "radio") input.required = needed && kind !== "";
      });
    });
  }

  form.querySelectorAll('input[name="kind"]').forEach(function (radio) {
    radio.addEventListener("change", showKind);
  });
  form.querySelectorAll("button.pick-mode").forEach(function (button) {
    button.addEventListener("click", function () {
      var select = form.querySelector('select[name="failure_mode"]');
      if (select) {
        select.value = button.getAttribute("data-mode");
        select.focus();
      }
    });
  });
  showKind();
})();

// The triage queue: "n" claims the next untriaged trial, the header box picks every row.
(function () {
  "use strict";
  var table = document.getElementById("queue-table");
  if (!table) return;
  var all = document.getElementById("pick-all");
  if (all) {
    all.addEventListener("change", function () {
      table.querySelectorAll('input[name="trials"]').forEach(function (box) {
        box.checked = all.checked;
      });
    });
  }
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key !== "n" || event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName))) return;
    var next = document.getElementById("next-form");
    if (next) next.submit();
  });
})();
