// Benchmark page: one line per ladder variant of a metric over the benchmark's successful runs.
// Data from the JSON endpoint in the canvas's data-url; x is the trigger batch (runs of one
// trigger line up), the tooltip gives the confidence interval, drawn as an error bar too.
(function () {
  "use strict";
  var canvas = document.getElementById("metric-chart");
  if (!canvas || typeof Chart === "undefined") return;
  var statusEl = document.getElementById("chart-status");
  var select = document.getElementById("chart-metric");
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  var INCORRECT = "#d62728";

  function fmt(v) {
    if (v == null) return "–";
    return Math.abs(v) >= 100 ? v.toFixed(1) : Number(v.toPrecision(4)).toString();
  }

  function batchLabel(p) {
    var d = new Date(p.t);
    var pad = function (n) { return String(n).padStart(2, "0"); };
    var label = pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes());
    return p.commit ? [label, p.commit.slice(0, 8)] : label;
  }

  // Confidence intervals as vertical error bars.
  var errorBars = {
    id: "errorBars",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx, y = chart.scales.y;
      chart.data.datasets.forEach(function (ds, i) {
        var meta = chart.getDatasetMeta(i);
        if (meta.hidden) return;
        meta.data.forEach(function (el, j) {
          var p = ds.data[j];
          if (!p || p.ci_low == null || p.ci_high == null) return;
          ctx.save();
          ctx.strokeStyle = ds.borderColor;
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          var top = y.getPixelForValue(p.ci_high), bottom = y.getPixelForValue(p.ci_low);
          ctx.moveTo(el.x, top); ctx.lineTo(el.x, bottom);
          ctx.moveTo(el.x - 4, top); ctx.lineTo(el.x + 4, top);
          ctx.moveTo(el.x - 4, bottom); ctx.lineTo(el.x + 4, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  function build(data) {
    // One x position per batch, in time order.
    var batches = {}, order = [];
    data.variants.forEach(function (v) {
      v.points.forEach(function (p) {
        if (!(p.batch in batches)) { batches[p.batch] = p; order.push(p.batch); }
        else if (p.t < batches[p.batch].t) { batches[p.batch] = p; }
      });
    });
    order.sort(function (a, b) { return batches[a].t < batches[b].t ? -1 : batches[a].t > batches[b].t ? 1 : 0; });
    var index = {};
    order.forEach(function (b, i) { index[b] = i; });
    var datasets = data.variants.map(function (v, i) {
      var color = PALETTE[i % PALETTE.length];
      return {
        label: v.position + ". " + v.name,
        variantId: v.id,
        data: v.points.map(function (p) {
          return { x: index[p.batch], y: p.value, run: p.run, ci_low: p.ci_low, ci_high: p.ci_high, commit: p.commit, t: p.t, correct: p.correct };
        }),
        borderColor: color,
        backgroundColor: color,
        // A run whose output was judged incorrect is a red cross: its speed is no improvement.
        pointStyle: v.points.map(function (p) { return p.correct === false ? "crossRot" : "circle"; }),
        pointBorderColor: v.points.map(function (p) { return p.correct === false ? INCORRECT : color; }),
        pointBorderWidth: v.points.map(function (p) { return p.correct === false ? 3 : 1; }),
        pointRadius: v.points.map(function (p) { return p.correct === false ? 8 : 4; }),
        pointHoverRadius: 6,
        tension: 0,
        spanGaps: true,
      };
    });
    return { labels: order.map(function (b) { return batchLabel(batches[b]); }), datasets: datasets };
  }

  var chart = null;

  function render(data) {
    var built = build(data);
    var unit = data.unit ? " (" + data.unit + ")" : "";
    var npoints = built.datasets.reduce(function (n, ds) { return n + ds.data.length; }, 0);
    if (chart) chart.destroy();
    chart = new Chart(canvas, {
      type: "line",
      data: { datasets: built.datasets },
      plugins: [errorBars],
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: false,
        interaction: { mode: "nearest", intersect: false },
        scales: {
          x: {
            type: "linear",
            min: -0.5,
            max: Math.max(built.labels.length - 0.5, 0.5),
            title: { display: true, text: "trigger batch" },
            // One tick per batch, at the integer positions (not from min = -0.5 on).
            afterBuildTicks: function (axis) {
              axis.ticks = built.labels.map(function (_, i) { return { value: i }; });
            },
            ticks: {
              autoSkip: true,
              maxRotation: 0,
              callback: function (value) { return built.labels[value]; },
            },
          },
          y: { title: { display: true, text: data.metric + unit }, beginAtZero: data.direction === "higher" },
        },
        plugins: {
          legend: { position: "bottom" },
          tooltip: {
            callbacks: {
              title: function (items) {
                var p = items[0].raw;
                return new Date(p.t).toLocaleString() + (p.commit ? " · " + p.commit.slice(0, 10) : "");
              },
              label: function (item) {
                var p = item.raw;
                var ci = p.ci_low != null && p.ci_high != null ? " (CI " + fmt(p.ci_low) + "–" + fmt(p.ci_high) + ")" : "";
                return item.dataset.label + ": " + fmt(p.y) + (data.unit ? " " + data.unit : "") + ci + " · run #" + p.run +
                  (p.correct === false ? " · INCORRECT OUTPUT" : "");
              },
            },
          },
        },
      },
    });
    canvas.dataset.metric = data.metric;
    canvas.dataset.points = String(npoints);
    canvas.dataset.rendered = "1";
    statusEl.textContent = npoints
      ? data.label + ": " + npoints + " successful run(s) in " + built.labels.length + " batch(es)."
      : "No successful runs with " + data.metric + " yet.";
  }

  function load(metric) {
    canvas.dataset.rendered = "0";
    statusEl.textContent = "Loading chart…";
    var url = canvas.dataset.url + "?metric=" + encodeURIComponent(metric);
    fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
          return body;
        });
      })
      .then(render)
      .catch(function (err) { statusEl.textContent = "Chart unavailable: " + err.message; });
  }

  if (select) select.addEventListener("change", function () { load(select.value); });
  load(canvas.dataset.metric || "decode_tok_s");
})();
