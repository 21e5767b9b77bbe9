// Console behaviour that HTML alone cannot give (CSP: no inline scripts, so it lives here).
// - <form data-confirm="…">: ask before posting a destructive action.
// - <button data-copy="#selector" data-copied="…">: copy that element's text (the API key shown once), then
//   say so with the data-copied words (the page renders them in the reader's language).
(function () {
  "use strict";

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var message = form instanceof HTMLFormElement ? form.getAttribute("data-confirm") : null;
    if (message && !window.confirm(message)) {
      event.preventDefault();
    }
  }, true);

  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    if (!button) {
      return;
    }
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) {
      return;
    }
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      button.textContent = button.getAttribute("data-copied") || button.textContent;
    });
  });
})();
