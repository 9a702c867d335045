// Draws every chart of the page: a <div data-chart="ID"> is drawn from the JSON of <script id="ID">
// (written by Django's json_script), with the vendored plotly.js. No data comes from elsewhere.
(function () {
  "use strict";
  function draw() {
    if (typeof window.Plotly === "undefined") { return; }
    document.querySelectorAll("[data-chart]").forEach(function (div) {
      var source = document.getElementById(div.getAttribute("data-chart"));
      if (!source) { return; }
      var figure;
      try { figure = JSON.parse(source.textContent); } catch (error) { return; }
      div.textContent = "";
      window.Plotly.newPlot(div, figure.data || [], figure.layout || {}, {
        responsive: true, displaylogo: false, modeBarButtonsToRemove: ["sendDataToCloud"],
      }).then(function () { div.setAttribute("data-drawn", "true"); });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
