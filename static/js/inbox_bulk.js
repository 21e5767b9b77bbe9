// Bulk inbox actions (issue 33): select rows with their checkboxes, with x on the focused row (as Gmail) or with
// Shift-click (a range), then act on them from the bar that appears with the count; undo toasts go after their time.
// An enhancement only: without it the checkboxes and the bar's buttons are a plain form (templates/inbox/_bulk.html).
// No words live here: they come from the page (#bulk-words), rendered with the catalogs.
(function () {
  "use strict";

  var lastClicked = null;  // the checkbox a Shift-click extends the range from

  function word(key) {
    var box = document.getElementById("bulk-words");
    var el = box && box.content && box.content.querySelector("[data-word='" + key + "']");
    return el ? el.textContent : "";
  }

  function boxes() {
    return Array.prototype.slice.call(document.querySelectorAll("#inbox-content input[data-bulk-select]"));
  }

  function selected() {
    return boxes().filter(function (box) { return box.checked; });
  }

  // The bar shows only while something is selected, and says how many (no live announcement for each tick: the
  // checkbox itself is announced; what an action did is announced by the server's #inbox-status).
  function refresh() {
    var bar = document.querySelector("[data-bulk-bar]");
    if (!bar) { return; }
    var count = selected().length;
    var hadFocus = bar.contains(document.activeElement);
    bar.hidden = count === 0;
    var label = bar.querySelector("[data-bulk-count]");
    if (label) { label.textContent = word("selected").replace("{n}", String(count)); }
    var clear = bar.querySelector("[data-bulk-clear]");
    if (clear) { clear.hidden = false; }
    boxes().forEach(function (box) {
      var row = box.closest("li.item");
      if (row) { row.classList.toggle("item--selected", box.checked); }
    });
    if (hadFocus && bar.hidden) {
      var heading = document.getElementById("notifications-title");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
    }
  }

  function toggle(box, checked) {
    box.checked = checked;
    lastClicked = box;
    refresh();
  }

  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:afterSettle", refresh);
  document.addEventListener("change", function (evt) {
    if (evt.target.matches && evt.target.matches("input[data-bulk-select]")) { refresh(); }
  });

  // Shift-click: every row between the last clicked checkbox and this one takes this one's new state.
  document.addEventListener("click", function (evt) {
    var target = evt.target;
    if (target.closest && target.closest("[data-bulk-clear]")) {
      selected().forEach(function (box) { box.checked = false; });
      lastClicked = null;
      refresh();
      var first = boxes()[0];
      if (first) { first.focus(); }
      return;
    }
    if (!target.matches || !target.matches("input[data-bulk-select]")) { return; }
    var all = boxes();
    if (evt.shiftKey && lastClicked && lastClicked !== target && all.indexOf(lastClicked) !== -1) {
      var from = all.indexOf(lastClicked), to = all.indexOf(target);
      var low = Math.min(from, to), high = Math.max(from, to);
      for (var i = low; i <= high; i++) { all[i].checked = target.checked; }
    }
    lastClicked = target;
    refresh();
  });

  function typing(el) {
    return !!(el && el.closest && (el.isContentEditable || el.closest("input, textarea, select, [contenteditable]")));
  }

  // x toggles the focused row's checkbox; z undoes; Escape with a selection clears it.
  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.isComposing || evt.ctrlKey || evt.metaKey || evt.altKey) { return; }
    if (typing(evt.target)) { return; }
    var dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) { return; }
    var active = document.activeElement;
    var row = active && active.closest ? active.closest("#inbox-content li.item") : null;
    if (evt.key === "x" && !evt.shiftKey && row) {
      var box = row.querySelector("input[data-bulk-select]");
      if (box) { toggle(box, !box.checked); evt.preventDefault(); }
    } else if (evt.key === "z" && !evt.shiftKey) {
      // z undoes the newest bulk action while its toast is shown (as in Gmail).
      var undos = document.querySelectorAll("[data-undo-toast] button[data-undo]:not([disabled])");
      if (undos.length) { undos[undos.length - 1].click(); evt.preventDefault(); }
    } else if (evt.key === "Escape" && selected().length && !(active && active.closest && active.closest("details[open], [data-toast]"))) {
      selected().forEach(function (b) { b.checked = false; });
      refresh();
      evt.preventDefault();
    }
  });

  // An undo toast goes after its time, but not while the pointer or keyboard focus is on it (WCAG 2.2.1): it
  // goes once they leave. The server accepts Undo a few seconds longer than the toast lasts.
  function expire(toast) {
    if (!toast.isConnected) { return; }
    if (toast.matches(":hover") || toast.contains(document.activeElement)) {
      toast.addEventListener("mouseleave", function () { expire(toast); }, { once: true });
      toast.addEventListener("focusout", function () { window.setTimeout(function () { expire(toast); }, 0); }, { once: true });
      return;
    }
    toast.remove();
  }

  document.addEventListener("htmx:oobAfterSwap", function () {
    document.querySelectorAll("[data-undo-toast]:not([data-timed])").forEach(function (toast) {
      toast.setAttribute("data-timed", "");
      var seconds = parseInt(toast.getAttribute("data-seconds"), 10) || 10;
      window.setTimeout(function () { expire(toast); }, seconds * 1000);
    });
  });

  // Undo used: the toast has done its job.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail.elt;
    var toast = elt && elt.closest && elt.closest("[data-undo-toast]");
    if (toast && evt.detail.successful) { toast.remove(); }
  });
})();
