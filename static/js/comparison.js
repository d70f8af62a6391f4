// Comparison charts: each chart div names its JSON endpoint in data-chart-url.
// No inline script (a strict CSP comes later); text is inserted with textContent.
(function () {
  "use strict";

  function showMessage(el, text) {
    const p = document.createElement("p");
    p.className = "chart-message";
    p.textContent = text;
    el.replaceChildren(p);
  }

  // customdata holds the URL of the trials behind a bar, point or heatmap cell.
  function urlOf(point) {
    if (typeof point.customdata === "string") return point.customdata;
    const data = point.data && point.data.customdata;
    if (!data) return null;
    if (Array.isArray(point.pointIndex)) {
      const row = data[point.pointIndex[0]];
      return row ? row[point.pointIndex[1]] : null;
    }
    return data[point.pointNumber] || null;
  }

  function draw(el, figure) {
    const config = { responsive: true, displaylogo: false };
    return window.Plotly.newPlot(el, figure.data, figure.layout, config).then(function () {
      el.dataset.rendered = "true";
      el.on("plotly_click", function (event) {
        const point = event.points && event.points[0];
        const url = point && urlOf(point);
        if (url) window.location.assign(url);
      });
    });
  }

  function load(el, attempt) {
    fetch(el.dataset.chartUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 202 && attempt < 60) {
          showMessage(el, "Computing…");
          window.setTimeout(function () { load(el, attempt + 1); }, 2000);
          return null;
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (figure) { return figure && draw(el, figure); })
      .catch(function (error) { showMessage(el, "Chart unavailable: " + error.message); });
  }

  if (!window.Plotly) {
    document.querySelectorAll("[data-chart-url]").forEach(function (el) { showMessage(el, "plotly.js did not load."); });
    return;
  }
  document.querySelectorAll("[data-chart-url]").forEach(function (el) { load(el, 0); });
})();
