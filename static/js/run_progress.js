// The run page's verification progress, kept live: while evaluations are queued or running, poll
// the API's small progress resource and update the bar and the line; once everything is done,
// reload the page once so the table and the scores show the new results. Without JS the page
// shows the progress as it was when served.
(function () {
  "use strict";
  var section = document.getElementById("run-progress");
  if (!section || !window.fetch) { return; }
  var url = section.getAttribute("data-url");
  var wasPending = Number(section.getAttribute("data-pending")) > 0;
  var bar = document.getElementById("run-progress-bar");
  var label = document.getElementById("run-progress-label");
  var note = document.getElementById("run-progress-note");
  var delay = 3000;

  function show(progress) {
    var finished = progress.evaluated + progress.failed;
    bar.value = progress.total ? Math.round(100 * finished / progress.total) : 100;
    label.textContent = progress.label;
    note.hidden = progress.pending === 0;
  }

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (progress) {
        if (!progress) { return; }
        show(progress);
        if (progress.pending > 0) { wasPending = true; window.setTimeout(poll, delay); }
        else if (wasPending) { window.location.reload(); }
      })
      .catch(function () { window.setTimeout(poll, delay * 4); });
  }
  if (wasPending) { window.setTimeout(poll, delay); }
  section.setAttribute("data-live", "true");
})();
