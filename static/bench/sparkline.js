// Home page: a sparkline of each variant's recent tok/s (oldest to newest) from data-values;
// drawn on the canvas directly (no Chart.js needed for a line this small).
(function () {
  "use strict";
  var color = getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#2f6fbf";
  Array.prototype.forEach.call(document.querySelectorAll("canvas.sparkline"), function (canvas) {
    var values = canvas.dataset.values.split(",").map(Number).filter(function (v) { return isFinite(v); });
    if (!values.length) return;
    var ratio = window.devicePixelRatio || 1, w = canvas.width, h = canvas.height;
    canvas.width = w * ratio; canvas.height = h * ratio;
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values), span = hi - lo || 1;
    var x = function (i) { return values.length === 1 ? w / 2 : 1 + i * (w - 2) / (values.length - 1); };
    var y = function (v) { return h - 2 - (v - lo) / span * (h - 4); };
    ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.beginPath();
    values.forEach(function (v, i) { if (i) ctx.lineTo(x(i), y(v)); else ctx.moveTo(x(i), y(v)); });
    ctx.stroke();
    ctx.fillStyle = color; ctx.beginPath();
    ctx.arc(x(values.length - 1), y(values[values.length - 1]), 2.5, 0, 2 * Math.PI); ctx.fill();
    canvas.dataset.rendered = "1";
  });
})();
