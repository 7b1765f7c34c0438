// Run page while the run is not final: poll its JSON and update the state, phase, queue place,
// elapsed time, heartbeat and log tail (the worker's live tail while it builds and runs) in place; once the run is final, load the page once more for
// its measurements and verdicts.
(function () {
  "use strict";
  var box = document.getElementById("run-status");
  if (!box || box.dataset.final === "1") return;
  var url = box.dataset.url;
  var $ = function (id) { return document.getElementById(id); };
  var INTERVAL_MS = 2000;
  var elapsed = box.querySelector("#run-elapsed");
  var startedAt = null;

  function ago(s) {
    if (s == null) return "–";
    if (s < 120) return Math.round(s) + " s ago";
    if (s < 7200) return Math.round(s / 60) + " min ago";
    return Math.round(s / 3600) + " h ago";
  }

  function duration(s) {
    if (s == null) return "not started";
    s = Math.round(s);
    return s < 120 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
  }

  function showState(state) {
    var badge = document.querySelector("#run-state .state");
    if (!badge) return;
    badge.textContent = state;
    badge.className = "state state-" + state.toLowerCase();
  }

  function showLog(tail) {
    var pre = $("run-log");
    if (!pre || !tail) return;
    var follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    if (pre.textContent !== tail) pre.textContent = tail;  // text, never HTML
    pre.hidden = false;
    var empty = $("run-log-empty");
    if (empty) empty.hidden = true;
    var source = $("run-log-source");
    if (source && !source.textContent.trim()) source.textContent = "· live from the worker (build and engine)";
    if (follow) pre.scrollTop = pre.scrollHeight;
  }

  function showQueue(queue) {
    var dd = $("run-queue");
    if (!dd) return;
    if (!queue) {  // it left the queue: the page reloads for the rest once the run is final
      dd.hidden = true;
      if (dd.previousElementSibling) dd.previousElementSibling.hidden = true;
      return;
    }
    dd.textContent = "position " + queue.position + " of " + queue.length + " in pool " + queue.pool +
      "'s queue · " + queue.message;
    dd.className = queue.served ? "" : "bad";
  }

  function apply(run) {
    box.dataset.state = run.state;
    showState(run.state);
    $("run-phase").textContent = run.phase || "–";
    showQueue(run.queue);
    $("run-heartbeat").textContent = ago(run.heartbeat_age_s);
    startedAt = run.started_at ? Date.now() - run.elapsed_s * 1000 : null;
    if (elapsed) elapsed.textContent = duration(run.elapsed_s);
    showLog(run.log_tail);
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (run) {
        apply(run);
        var live = $("run-live");
        if (run.is_final) { window.location.reload(); return; }
        if (live) live.textContent = "live";
        window.setTimeout(poll, INTERVAL_MS);
      })
      .catch(function () {
        var live = $("run-live");
        if (live) live.textContent = "connection lost, retrying";
        window.setTimeout(poll, INTERVAL_MS * 3);
      });
  }

  // The elapsed time ticks between polls.
  window.setInterval(function () {
    if (startedAt != null && elapsed) elapsed.textContent = duration((Date.now() - startedAt) / 1000);
  }, 1000);
  poll();
})();
