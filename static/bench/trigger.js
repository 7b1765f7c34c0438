// Trigger form: keep the "what will run" summary in step with the checked variants, ref, repeats and patch.
(function () {
  "use strict";
  var form = document.querySelector("form.trigger-form");
  var out = document.getElementById("trigger-summary-text");
  if (!form || !out) return;
  var base = out.textContent.replace(/\s+/g, " ").trim();
  function update() {
    var names = Array.prototype.filter.call(form.querySelectorAll("input[name=variants]"), function (b) { return b.checked; })
      .map(function (b) { return b.parentNode.textContent.trim(); });
    var ref = form.querySelector("input[name=ref]");
    var patch = form.querySelector("input[name=patch]");
    var repeats = form.querySelector("input[name=repeats]");
    var reps = repeats && repeats.value.trim() ? repeats.value.trim() : form.dataset.repeats;
    var text = names.length
      ? names.length + " run(s) — " + names.join(", ") + " — of " + form.dataset.model + " (TP " + form.dataset.tp + ", " +
        reps + " repeats) on pool " + form.dataset.pool + " (queue " + form.dataset.queue + ")"
      : "nothing: check at least one variant";
    if (names.length && ref && ref.value.trim()) text += ", engine at ref " + ref.value.trim();
    if (names.length && patch && patch.files && patch.files.length) text += ", with patch " + patch.files[0].name;
    out.textContent = names.length ? text + "." : text;
    out.dataset.base = base;
  }
  form.addEventListener("change", update);
  form.addEventListener("input", update);
  update();
})();
