// A shared page and its downloaded report: draw each chart from the figure JSON beside it
// (no request: the report opened from disk has no server), and hide what needs the API.
(function () {
  "use strict";
  document.querySelectorAll("button.expand, button.copy-link").forEach(function (b) { b.hidden = true; });
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
