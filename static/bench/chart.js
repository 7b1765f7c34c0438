// Benchmark page: one timeline per metric (canvas.history-chart), one line per ladder variant.
// x: the main line's commits in first-parent order (the date is in the tooltip); error bars from
// the confidence intervals and annotations are drawn by two small plugins of our own; runs judged
// incorrect are red crosses apart from the lines, runs of other branches grey rings; clicking a
// point opens its run.
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;
  var theme = window.benchTheme;
  window.benchCharts = {};

  function fmt(v) {
    if (v == null) return "–";
    return Math.abs(v) >= 100 ? v.toFixed(1) : Number(v.toPrecision(4)).toString();
  }

  // A stored value as shown: the server's display of the metric (benchsite/bench/units.py) says
  // the unit and the factor (a share 0.085 reads 8.5 %).
  function shown(data, v) {
    if (v == null) return "–";
    var d = data.display || { unit: data.unit, scale: 1 };
    return fmt(v * d.scale) + (d.unit ? (d.unit === "%" ? "%" : " " + d.unit) : "");
  }

  // An axis tick: the number as shown (the unit is in the axis title), % on a share axis.
  function tick(data, v) {
    var d = data.display || { unit: data.unit, scale: 1 };
    var x = Number((v * d.scale).toPrecision(4));
    return d.unit === "%" ? x + "%" : String(x);
  }

  function axisTitle(data) {
    var d = data.display || { label: data.metric, unit: data.unit };
    return d.label + (d.unit ? " (" + d.unit + ")" : "");
  }

  var errorBars = {
    id: "benchErrorBars",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx, y = chart.scales.y;
      chart.data.datasets.forEach(function (ds, i) {
        var meta = chart.getDatasetMeta(i);
        if (meta.hidden || !chart.isDatasetVisible(i)) return;
        meta.data.forEach(function (el, j) {
          var p = ds.data[j];
          if (!p || p.lo == null || p.hi == null) return;
          var top = y.getPixelForValue(p.hi), bottom = y.getPixelForValue(p.lo);
          ctx.save();
          ctx.strokeStyle = ds.borderColor;
          ctx.lineWidth = 1.2;
          ctx.beginPath();
          ctx.moveTo(el.x, top); ctx.lineTo(el.x, bottom);
          ctx.moveTo(el.x - 3, top); ctx.lineTo(el.x + 3, top);
          ctx.moveTo(el.x - 3, bottom); ctx.lineTo(el.x + 3, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  // Annotations: a band over their x range (a line for one commit) with the text on top. Drawn
  // with fillText on the canvas, so a note's text is never parsed as HTML.
  var annotations = {
    id: "benchAnnotations",
    beforeDatasetsDraw: function (chart, _args, opts) {
      var ctx = chart.ctx, x = chart.scales.x, area = chart.chartArea;
      (opts.items || []).forEach(function (a, k) {
        if (a.x_from == null) return;
        var left = x.getPixelForValue(a.x_from - 0.4), right = x.getPixelForValue(a.x_to + 0.4);
        left = Math.max(left, area.left); right = Math.min(right, area.right);
        if (right < area.left || left > area.right) return;
        ctx.save();
        ctx.fillStyle = theme.note;
        ctx.fillRect(left, area.top, Math.max(right - left, 2), area.bottom - area.top);
        ctx.strokeStyle = theme.noteLine;
        ctx.setLineDash([4, 3]);
        ctx.beginPath(); ctx.moveTo(left, area.top); ctx.lineTo(left, area.bottom); ctx.stroke();
        ctx.fillStyle = theme.noteLine;
        ctx.font = "11px system-ui, sans-serif";
        ctx.fillText(a.text, left + 3, area.top + 11 + 12 * (k % 3));
        ctx.restore();
      });
    },
  };

  // Verdict and change-point marks (/api/benchmarks/<slug>/marks/, the regressions app): a
  // triangle on a judged run's point (up: improvement, down: regression) and a dashed line at a
  // change point's commit. A mark whose run was downsampled away is still in the table fallback.
  var marks = {
    id: "benchMarks",
    afterDatasetsDraw: function (chart, _args, opts) {
      var m = opts.marks, data = opts.data;
      if (!m || !data) return;
      var ctx = chart.ctx, area = chart.chartArea, xs = chart.scales.x, ys = chart.scales.y, drawn = 0;
      var byRun = {};
      chart.data.datasets.forEach(function (ds) {
        ds.data.forEach(function (p) { byRun[p.run] = p; });
      });
      (m.change_points || []).forEach(function (c) {
        var p = byRun[c.run], x = p ? p.x : null;
        if (x == null) {
          Object.keys(data.axis).forEach(function (k) { if (c.commit && data.axis[k].commit === c.commit) x = Number(k); });
        }
        if (x == null) return;
        var px = xs.getPixelForValue(x);
        if (px < area.left || px > area.right) return;
        ctx.save();
        ctx.strokeStyle = c.change != null && c.change < 0 === (data.direction === "higher") ? theme.bad : theme.ok;
        ctx.setLineDash([6, 4]);
        ctx.lineWidth = 1.5;
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
        ctx.fillStyle = ctx.strokeStyle;
        ctx.font = "11px system-ui, sans-serif";
        var pct = c.change != null ? (c.change >= 0 ? "+" : "") + (c.change * 100).toFixed(1) + "%" : "";
        ctx.fillText("change " + pct + (c.status && c.status !== "open" ? " (" + c.status + ")" : ""), px + 3, area.bottom - 4);
        ctx.restore();
        drawn += 1;
      });
      (m.verdicts || []).forEach(function (v) {
        var p = byRun[v.run];
        if (!p) return;
        var px = xs.getPixelForValue(p.x), py = ys.getPixelForValue(p.y), up = v.kind === "improvement";
        if (px < area.left || px > area.right) return;
        var tip = up ? py - 16 : py + 16, base = up ? py - 7 : py + 7;
        ctx.save();
        ctx.fillStyle = up ? theme.ok : theme.bad;
        ctx.beginPath(); ctx.moveTo(px, tip); ctx.lineTo(px - 6, base); ctx.lineTo(px + 6, base); ctx.closePath(); ctx.fill();
        ctx.restore();
        drawn += 1;
      });
      chart.canvas.dataset.marks = String(drawn);
    },
  };

  function datasets(data) {
    var sets = data.variants.map(function (v, i) {
      var color = theme.palette[i % theme.palette.length];
      return {
        label: v.position + ". " + v.name, data: v.points, borderColor: color, backgroundColor: color,
        pointRadius: v.points.length > 300 ? 1.5 : 3, pointHoverRadius: 5, borderWidth: 1.5, tension: 0, spanGaps: true,
      };
    });
    var bad = [];
    data.variants.forEach(function (v) {
      v.incorrect.forEach(function (p) { bad.push(Object.assign({ variant: v.name }, p)); });
    });
    sets.push({
      label: "incorrect output", data: bad, showLine: false, pointStyle: "crossRot", pointRadius: 7,
      pointBorderWidth: 2.5, borderColor: theme.bad, backgroundColor: theme.bad, incorrect: true,
    });
    // runs of other branches (or of no branch): grey rings at the commit they branched from
    var apart = [];
    data.variants.forEach(function (v) {
      (v.off_line || []).forEach(function (p) { apart.push(Object.assign({ variant: v.name }, p)); });
    });
    if (apart.length) {
      sets.push({
        label: "other branches", data: apart, showLine: false, pointStyle: "circle", pointRadius: 6,
        pointBorderWidth: 2, borderColor: theme.muted, backgroundColor: "transparent", offLine: true,
      });
    }
    return sets;
  }

  function tickLabel(data, x) {
    var tick = data.axis[x];
    if (!tick) return "";
    return tick.commit ? tick.commit.slice(0, 8) : tick.t.slice(5, 16).replace("T", " ");
  }

  function render(canvas, statusEl, data, marksData) {
    var runUrl = canvas.dataset.runUrl || "/runs/0/";
    var sets = datasets(data);
    var npoints = sets.reduce(function (n, ds) { return n + ds.data.length; }, 0);
    var old = Chart.getChart(canvas);
    if (old) old.destroy();
    var chart = new Chart(canvas, {
      type: "line",
      data: { datasets: sets },
      plugins: [errorBars, annotations, marks],
      options: {
        animation: false, maintainAspectRatio: false, parsing: false, normalized: true,
        interaction: { mode: "nearest", intersect: true },
        onClick: function (evt, elements) {
          if (!elements.length) return;
          var p = sets[elements[0].datasetIndex].data[elements[0].index];
          window.location.href = runUrl.replace("/0/", "/" + p.run + "/");
        },
        onHover: function (evt, elements) { evt.native.target.style.cursor = elements.length ? "pointer" : "default"; },
        scales: {
          x: {
            type: "linear", min: -0.5, max: Math.max(data.x_count - 0.5, 0.5),
            title: { display: true, text: data.main_line ? "commit of " + data.main_line + " (first-parent order)" : "commit (in the order first run)" },
            afterBuildTicks: function (axis) {
              axis.ticks = Object.keys(data.axis).map(function (x) { return { value: Number(x) }; });
            },
            ticks: { autoSkip: true, maxRotation: 0, callback: function (value) { return tickLabel(data, value); } },
          },
          y: { title: { display: true, text: axisTitle(data) }, beginAtZero: data.direction === "higher",
               ticks: { callback: function (value) { return tick(data, value); } } },
        },
        plugins: {
          benchAnnotations: { items: data.annotations },
          benchMarks: { marks: marksData, data: data },
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              title: function (items) {
                var raw = items[0].raw;
                if (raw.branch !== undefined) return (raw.commit || "").slice(0, 12) + " · " + (raw.branch || "no branch");
                var tick = data.axis[raw.x];
                if (!tick) return "";
                return (tick.commit ? tick.commit.slice(0, 12) + " · " : "") + new Date(tick.t).toLocaleString();
              },
              label: function (item) {
                var p = item.raw;
                var ci = p.lo != null && p.hi != null ? " (CI " + shown(data, p.lo) + " – " + shown(data, p.hi) + ")" : "";
                var name = item.dataset.incorrect || p.incorrect ? p.variant + ": INCORRECT OUTPUT"
                  : item.dataset.offLine ? p.variant + " (off " + data.main_line + ")" : item.dataset.label;
                return name + ": " + shown(data, p.y) + ci + " · run #" + p.run;
              },
            },
          },
        },
      },
    });
    window.benchCharts[data.metric] = chart;
    canvas.dataset.points = String(npoints);
    canvas.dataset.rendered = "1";
    var notes = data.annotations.filter(function (a) { return a.x_from != null; }).length;
    statusEl.textContent = npoints
      ? npoints + " point(s) over " + data.x_count + " commit(s)" + (notes ? ", " + notes + " annotation(s)" : "") + "."
      : "No successful runs with " + (data.display ? data.display.label : data.metric) + " yet.";
  }

  function load(canvas) {
    var statusEl = document.getElementById("chart-status-" + canvas.dataset.metric);
    canvas.dataset.rendered = "0";
    var query = "?metric=" + encodeURIComponent(canvas.dataset.metric) +
      (canvas.dataset.point ? "&point=" + encodeURIComponent(canvas.dataset.point) : "");
    fetch(canvas.dataset.url + query, { headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
          return body;
        });
      })
      .then(function (data) {
        // marks are an extra: a chart is drawn without them when their endpoint fails
        var url = canvas.dataset.marksUrl;
        if (!url) return render(canvas, statusEl, data, null);
        return fetch(url + query, { headers: { Accept: "application/json" } })
          .then(function (r) { return r.ok ? r.json() : null; }, function () { return null; })
          .then(function (marksData) { render(canvas, statusEl, data, marksData); });
      })
      .catch(function (err) { statusEl.textContent = "Chart unavailable: " + err.message; });
  }

  Array.prototype.forEach.call(document.querySelectorAll("canvas.history-chart"), load);
})();
