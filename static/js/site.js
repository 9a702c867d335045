// Small enhancements; every page works without them.
(function () {
  "use strict";

  // Diff layout toggle: switch between side-by-side and unified in place and keep it in the URL.
  function showDiff(view) {
    document.querySelectorAll("[data-diff-view]").forEach(function (el) {
      el.hidden = el.getAttribute("data-diff-view") !== view;
    });
    document.querySelectorAll("[data-diff-toggle]").forEach(function (link) {
      if (link.getAttribute("data-diff-toggle") === view) { link.setAttribute("aria-current", "true"); }
      else { link.removeAttribute("aria-current"); }
    });
    document.querySelectorAll('input[name="view"]').forEach(function (input) { input.value = view; });
    var url = new URL(window.location.href);
    url.searchParams.set("view", view);
    window.history.replaceState(null, "", url.toString());
  }
  document.querySelectorAll("[data-diff-toggle]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      showDiff(link.getAttribute("data-diff-toggle"));
    });
  });

  // Filter menus and the kernel picker apply as soon as they change (the buttons stay for no-JS use).
  document.querySelectorAll("#level-filters select, #against-select").forEach(function (select) {
    select.addEventListener("change", function () { select.form.submit(); });
  });
  // The p box submits with Enter or the Apply button (a change handler would submit twice).

  // A board's "as of" time, also as an age ("updated 3 s ago"): the page may come from a cache.
  document.querySelectorAll("[data-as-of]").forEach(function (time) {
    var age = Math.max(0, Math.round(Date.now() / 1000 - Number(time.getAttribute("data-as-of"))));
    var out = time.parentNode.querySelector("[data-as-of-age]");
    if (out && isFinite(age)) { out.textContent = " (updated " + age + " s ago)"; }
  });
})();
