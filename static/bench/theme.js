// Colours for charts from the stylesheet's variables, so charts follow the browser's light or
// dark theme (prefers-color-scheme) like the rest of the page.
(function () {
  "use strict";
  function css(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }
  window.benchTheme = {
    fg: css("--fg", "#1f2328"),
    muted: css("--muted", "#6a737d"),
    grid: css("--line", "#d8dee4"),
    bad: css("--bad", "#cf222e"),
    ok: css("--ok", "#1a7f37"),
    loss: css("--loss", "#d4620f"),
    accent: css("--accent", "#2f6fbf"),
    note: css("--note", "rgba(154, 103, 0, 0.15)"),
    noteLine: css("--warn", "#9a6700"),
    palette: ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"],
  };
  if (window.Chart) {
    Chart.defaults.color = window.benchTheme.fg;
    Chart.defaults.borderColor = window.benchTheme.grid;
    Chart.defaults.animation = false;
  }
})();
