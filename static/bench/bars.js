// Bar charts from data embedded in the page (json_script): the optimization waterfall (each
// step a floating bar from the tok/s of the step it builds on to its own, losses downwards in
// their own colour, the step's allreduce share as a dot on a % axis) and the run page's
// decode-step budget (allreduce + the rest, stacked, with the memory-bandwidth floor as a line).
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;
  var theme = window.benchTheme;

  function json(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function waterfall() {
    var canvas = document.getElementById("waterfall-chart"), bars = json("waterfall-data");
    var share = json("waterfall-share-axis") || { label: "allreduce share", unit: "%", scale: 100 };
    if (!canvas || !bars) return;
    var runUrl = "/runs/0/";
    var hasShare = bars.some(function (b) { return b.share != null; });
    function pct(v) { return v == null ? "–" : (v * share.scale).toFixed(1) + share.unit; }
    var sets = [{
      type: "bar", label: "decode tok/s (from the step it builds on)", yAxisID: "y", minBarLength: 4, order: 2,
      data: bars.map(function (b) { return [b.from, b.to]; }),
      backgroundColor: bars.map(function (b, i) {
        if (b.incorrect) return theme.bad;
        if (i === 0) return theme.muted;
        return b.loss ? theme.loss : theme.ok;
      }),
      borderColor: bars.map(function (b) { return b.no_effect ? theme.fg : "transparent"; }),
      borderWidth: bars.map(function (b) { return b.no_effect ? 2 : 0; }),
    }];
    if (hasShare) sets.push({
      type: "line", label: share.label + " (" + share.unit + ")", yAxisID: "share", showLine: false, order: 1,
      data: bars.map(function (b) { return b.share == null ? null : b.share * share.scale; }),
      pointRadius: 6, pointStyle: "rectRot", borderColor: theme.accent, backgroundColor: theme.accent,
    });
    var scales = { y: { beginAtZero: true, title: { display: true, text: "decode throughput (tok/s)" } } };
    if (hasShare) scales.share = {
      position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
      title: { display: true, text: share.label + " (" + share.unit + ")" },
      ticks: { callback: function (v) { return v + share.unit; } },
    };
    new Chart(canvas, {
      data: { labels: bars.map(function (b) { return b.label; }), datasets: sets },
      options: {
        maintainAspectRatio: false,
        onClick: function (evt, els) { if (els.length) window.location.href = runUrl.replace("/0/", "/" + bars[els[0].index].run + "/"); },
        plugins: {
          legend: { display: hasShare, position: "bottom" },
          tooltip: { callbacks: { label: function (item) {
            var b = bars[item.dataIndex];
            if (item.dataset.yAxisID === "share") return "allreduce share " + pct(b.share);
            var change = b.gain_pct != null ? " (" + (b.gain_pct >= 0 ? "+" : "") + (b.gain_pct * 100).toFixed(1) + "%)" : "";
            return b.to.toFixed(1) + " tok/s" + change + (b.incorrect ? " · INCORRECT OUTPUT" : "");
          }, afterLabel: function (item) {
            var b = bars[item.dataIndex];
            if (item.dataset.yAxisID === "share") return "";
            if (b.no_effect) return "no effect: " + b.no_effect_settings.join(", ");
            return b.took_effect ? "took effect: " + b.took_effect : "";
          } } },
        },
        scales: scales,
      },
    });
    canvas.dataset.rendered = "1";
    canvas.dataset.bars = String(bars.length);
  }

  // The floor as a vertical line across the horizontal bar.
  var floorLine = {
    id: "benchFloor",
    afterDatasetsDraw: function (chart, _a, opts) {
      if (opts.ms == null) return;
      var x = chart.scales.x.getPixelForValue(opts.ms), area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      ctx.strokeStyle = theme.fg; ctx.setLineDash([5, 3]); ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(x, area.top); ctx.lineTo(x, area.bottom); ctx.stroke();
      ctx.fillStyle = theme.fg; ctx.font = "11px system-ui, sans-serif";
      ctx.fillText("memory-bandwidth floor " + opts.ms.toFixed(2) + " ms", x + 4, area.top + 11);
      ctx.restore();
    },
  };

  function budget() {
    var canvas = document.getElementById("budget-chart"), b = json("budget-data");
    if (!canvas || !b) return;
    var sets = [];
    if (b.allreduce_ms != null) sets.push({ label: "allreduce (" + b.allreduce_from + ")", data: [b.allreduce_ms], backgroundColor: theme.palette[3] });
    if (b.gap_ms != null) sets.push({ label: "launch gaps", data: [b.gap_ms], backgroundColor: theme.palette[2] });
    sets.push({ label: b.allreduce_ms != null || b.gap_ms != null ? "rest of the step" : "whole step (allreduce not measured)", data: [b.rest_ms], backgroundColor: theme.palette[0] });
    new Chart(canvas, {
      type: "bar",
      data: { labels: ["one decode step"], datasets: sets },
      plugins: [floorLine],
      options: {
        indexAxis: "y", maintainAspectRatio: false,
        scales: { x: { stacked: true, beginAtZero: true, title: { display: true, text: "ms per token" },
                       suggestedMax: Math.max(b.step_ms, b.floor_ms || 0) * 1.05 },
                  y: { stacked: true } },
        plugins: { benchFloor: { ms: b.floor_ms }, legend: { position: "bottom" },
                   tooltip: { callbacks: { label: function (item) { return item.dataset.label + ": " + item.raw.toFixed(3) + " ms"; } } } },
      },
    });
    canvas.dataset.rendered = "1";
  }

  waterfall();
  budget();
})();
