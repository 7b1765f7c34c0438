// Run page: poll the run's JSON while it is not final; reload when its state changes.
(function () {
  "use strict";
  var box = document.getElementById("run-status");
  if (!box || box.dataset.final === "1") return;
  var url = box.dataset.url;
  var state = box.dataset.state;
  var phase = document.getElementById("run-phase");
  var heartbeat = document.getElementById("run-heartbeat");
  var live = document.getElementById("run-live");
  var INTERVAL_MS = 3000;

  function ago(s) {
    if (s == null) return "–";
    if (s < 120) return Math.round(s) + " s ago";
    if (s < 7200) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (run) {
        if (run.state !== state) {
          window.location.reload();
          return;
        }
        if (phase) phase.textContent = run.phase || "–";
        if (heartbeat) {
          heartbeat.textContent = ago(run.heartbeat_age_s);
        }
        if (live) live.textContent = "live";
        window.setTimeout(poll, INTERVAL_MS);
      })
      .catch(function () {
        if (live) live.textContent = "connection lost, retrying";
        window.setTimeout(poll, INTERVAL_MS * 3);
      });
  }
  window.setTimeout(poll, INTERVAL_MS);
})();
