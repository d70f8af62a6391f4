// Triage feedback form: show the fieldsets for the chosen kind, and "use" buttons that pick a
// similar failure mode. Without JavaScript every fieldset stays visible and the form still works.
(function () {
  "use strict";
  var form = document.getElementById("feedback-form");
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
