// Comparison charts: each chart div names its JSON endpoint in data-chart-url.
// No inline script (a strict CSP comes later); text is inserted with textContent.
// It asks for every figure at once; the comparison page has it fetch plotly.js (data-plotly-src)
// after the load event, so running 1.2 MB of plotly.js does not hold the first screen (the grid
// and trend pages load plotly.js themselves, before this file).
// A chart is drawn when it nears the viewport: drawing is most of the cost, and the first screen
// should not wait for charts below it.
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
    const start = performance.now();
    return window.Plotly.newPlot(el, figure.data, figure.layout, config).then(function () {
      performance.measure("draw " + el.id, { start: start });  // read by bench/page_load_bench.py
      el.dataset.rendered = "true";
      el.on("plotly_click", function (event) {
        const point = event.points && event.points[0];
        const url = point && urlOf(point);
        if (url) window.location.assign(url);
      });
    });
  }

  function wait(ms) {
    return new Promise(function (resolve) { window.setTimeout(resolve, ms); });
  }

  // The figure, asked again every 2 s while the comparison is computed (202).
  function figureOf(el, attempt) {
    return fetch(el.dataset.chartUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 202 && attempt < 60) {
          showMessage(el, "Computing…");
          return wait(2000).then(function () { return figureOf(el, attempt + 1); });
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      });
  }

  const plotlySrc = document.currentScript && document.currentScript.dataset.plotlySrc;
  let plotly = null;

  function plotlyLoaded() {
    if (!plotly) {
      plotly = new Promise(function (resolve, reject) {
        if (window.Plotly || !plotlySrc) {
          resolve();
          return;
        }
        const script = document.createElement("script");
        script.src = plotlySrc;
        script.onload = resolve;
        script.onerror = function () { reject(new Error("plotly.js did not load")); };
        document.head.appendChild(script);
      });
    }
    return plotly;
  }

  const charts = Array.from(document.querySelectorAll("[data-chart-url]"));
  const figures = charts.map(function (el) { return figureOf(el, 0); });

  function drawOne(el, i) {
    Promise.all([plotlyLoaded(), figures[i]])
      .then(function (loaded) {
        if (!window.Plotly) throw new Error("plotly.js did not load");
        return draw(el, loaded[1]);
      })
      .catch(function (error) { showMessage(el, "Chart unavailable: " + error.message); });
  }

  // Charts within 200 px of the viewport are drawn now, the others as they scroll near it.
  function drawWhenNear() {
    if (!("IntersectionObserver" in window)) {
      charts.forEach(drawOne);
      return;
    }
    const observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        observer.unobserve(entry.target);
        drawOne(entry.target, charts.indexOf(entry.target));
      });
    }, { rootMargin: "200px 0px" });
    charts.forEach(function (el) { observer.observe(el); });
  }

  drawWhenNear();
  if (document.readyState === "complete") plotlyLoaded();
  else window.addEventListener("load", function () { plotlyLoaded(); });
})();
