// Fuzzball Web UI: dates in the browser's locale, and confirmations for drastic buttons.
// Loaded from this origin (the Content-Security-Policy allows no inline script).
"use strict";
(function () {
  function localizeTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (element) {
      var date = new Date(element.getAttribute("datetime"));
      if (!isNaN(date.getTime())) {
        element.title = element.textContent;
        element.textContent = date.toLocaleString();
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localizeTimes(document);
  });
  // pages htmx swaps in get the same treatment
  document.addEventListener("htmx:afterSettle", function (event) {
    localizeTimes(event.target);
  });
  // <button data-confirm="..."> asks before its form is sent
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-confirm]");
    if (button && !window.confirm(button.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });
})();
