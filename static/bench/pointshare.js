// The run page's "allreduce share vs concurrency" line chart, from data embedded in the page
// (json_script "point-share-data": one line per prompt length, x concurrency, y share in %).
// The points table above it holds the same figures.
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;
  var canvas = document.getElementById("point-share-chart"), el = document.getElementById("point-share-data");
  if (!canvas || !el) return;
  var data = JSON.parse(el.textContent), theme = window.benchTheme;
  var xs = [];
  data.lines.forEach(function (line) {
    line.points.forEach(function (p) { if (xs.indexOf(p.x) < 0) xs.push(p.x); });
  });
  xs.sort(function (a, b) { return a - b; });
  new Chart(canvas, {
    type: "line",
    data: {
      datasets: data.lines.map(function (line, i) {
        var colour = theme.palette[i % theme.palette.length];
        return { label: line.label, data: line.points, borderColor: colour, backgroundColor: colour, pointRadius: 4 };
      }),
    },
    options: {
      maintainAspectRatio: false,
      scales: {
        // log scale (concurrency doubles from point to point), a tick at each measured concurrency
        x: { type: "logarithmic", title: { display: true, text: data.x_label },
             afterBuildTicks: function (axis) { axis.ticks = xs.map(function (v) { return { value: v }; }); },
             ticks: { callback: function (v) { return String(v); } } },
        y: { beginAtZero: true, title: { display: true, text: data.y_label },
             ticks: { callback: function (v) { return v + data.unit; } } },
      },
      plugins: {
        legend: { position: "bottom" },
        tooltip: { callbacks: { label: function (item) {
          var d = item.raw;
          return item.dataset.label + ", " + d.x + " streams (" + d.point + "): " + d.y.toFixed(1) + data.unit;
        } } },
      },
    },
  });
  canvas.dataset.rendered = "1";
})();
