// A shared page and its downloaded report: draw each chart from the figure JSON beside it
// (no request: the report opened from disk has no server), and hide what needs the API.
(function () {
  "use strict";
  // "show all" asks the share for a step's whole text (show_all.js); a report, opened from disk,
  // has no server to ask, so there the preview stays.
  if (!document.querySelector("[data-step-api]")) {
    document.querySelectorAll("button.expand").forEach(function (b) { b.hidden = true; });
  }
  // A step's permalink within the share (in a report, its anchor in the file).
  document.querySelectorAll("button.copy-link").forEach(function (b) {
    b.addEventListener("click", function () {
      navigator.clipboard.writeText(new URL(b.dataset.url, window.location.href).href)
        .then(function () { b.textContent = "copied"; });
    });
  });
  document.querySelectorAll("[data-figure]").forEach(function (el) {
    const data = document.getElementById(el.dataset.figure);
    if (!data || !window.Plotly) {
      el.textContent = "Chart unavailable: plotly.js did not load";
      return;
    }
    const figure = JSON.parse(data.textContent);
    window.Plotly.newPlot(el, figure.data, figure.layout, { responsive: true, displaylogo: false, staticPlot: false })
      .then(function () { el.dataset.rendered = "true"; });
  });
})();
