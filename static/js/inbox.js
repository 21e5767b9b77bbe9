// Inbox and preference screens: relative times, focus after swaps, readable errors for htmx requests.
// Everything here is an enhancement: the pages work without it (CSP forbids inline scripts).
(function () {
  "use strict";

  var MINUTE = 60, HOUR = 3600, DAY = 86400, WEEK = 7 * DAY;

  // Same wording and thresholds as the server's `reltime` filter, so the first paint never jumps.
  function relative(seconds) {
    if (seconds < MINUTE) { return "just now"; }
    if (seconds < HOUR) { return Math.floor(seconds / MINUTE) + " min ago"; }
    if (seconds < DAY) { return Math.floor(seconds / HOUR) + " h ago"; }
    var days = Math.floor(seconds / DAY);
    return days === 1 ? "yesterday" : days + " days ago";
  }

  // Older times keep the server's local-date text; the absolute time stays in the title (hover).
  function refreshTimes(root) {
    if (!root || !root.querySelectorAll) { return; }
    var now = Date.now();
    root.querySelectorAll("time[data-relative]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      var seconds = Math.max(0, (now - at) / 1000);
      if (seconds < WEEK) { el.textContent = relative(seconds); }
    });
  }

  var MESSAGES = {
    0: "The server could not be reached. Check your connection and try again.",
    400: "This page is out of date. Reload it and try again.",
    401: "Your session ended. Sign in again to continue.",
    403: "You are not allowed to do that.",
    404: "That item no longer exists. Reload the page to see the current list.",
    422: "That change is not allowed.",
    429: "Too many requests. Wait a moment and try again."
  };

  function toast(message) {
    var region = document.getElementById("toasts");
    if (!region) { return; }  // signed-out pages have no toast region
    var box = document.createElement("div");
    box.className = "toast toast--error";
    box.setAttribute("data-toast", "");
    box.setAttribute("role", "alert");
    var text = document.createElement("span");
    text.className = "toast__text";
    text.textContent = message;
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast__close";
    close.setAttribute("data-toast-close", "");
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "\u00d7";
    box.appendChild(text);
    box.appendChild(close);
    region.appendChild(box);
  }

  function focusable(el) {
    if (el.hasAttribute("tabindex")) { return el; }
    return el.querySelector("button:not([disabled]), a[href], [tabindex]");
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshTimes(document);
    window.setInterval(function () { refreshTimes(document); }, 30 * 1000);
  });

  // htmx:load fires for every piece of content htmx inserts, including out-of-band swaps.
  document.addEventListener("htmx:load", function (evt) { refreshTimes(evt.detail.elt); });

  // A form marked data-swap-422 shows the server's explanation in place instead of failing silently.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    if (evt.detail.xhr.status === 422 && elt && elt.closest("[data-swap-422]")) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail.xhr.status;
    toast(MESSAGES[status] || "Something went wrong on our side. Please try again in a moment.");
  });

  document.addEventListener("htmx:sendError", function () { toast(MESSAGES[0]); });

  // A row that leaves the list (snoozed, unsnoozed) is swapped for nothing, and htmx fires no settle
  // event for it: remember its neighbours before the swap and, once it is gone, focus the next row (or
  // the previous one, or the list's heading) instead of losing focus to the page.
  function focusAfterRemoval(target, candidates) {
    if (target.isConnected || (target.id && document.getElementById(target.id))) { return; }  // redrawn, not gone
    for (var i = 0; i < candidates.length; i++) {
      var el = candidates[i];
      if (el && el.isConnected) {
        if (!el.hasAttribute("tabindex")) { el.setAttribute("tabindex", "-1"); }
        el.focus();
        return;
      }
    }
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var target = evt.detail.target;
    if (!target || !target.matches || !target.matches("li.item")) { return; }
    var candidates = [target.nextElementSibling, target.previousElementSibling,
      document.getElementById("notifications-title")];
    window.setTimeout(function () { focusAfterRemoval(target, candidates); }, 0);
  });

  // An outerHTML swap removes the button that had focus; put focus back on the new element so
  // keyboard and screen-reader users keep their place (htmx only restores focus by matching id).
  document.addEventListener("htmx:afterSettle", function (evt) {
    var invalid = document.querySelector("[aria-invalid='true']");
    if (invalid && evt.detail.target && evt.detail.target.id && invalid.closest("#" + evt.detail.target.id)) {
      invalid.focus();  // a refused snooze time: straight back to the field that explains it
      return;
    }
    var fresh = document.querySelector("[data-first-new]");
    if (fresh) {
      fresh.removeAttribute("data-first-new");
      fresh.focus();
      return;
    }
    var active = document.activeElement;
    var id = evt.detail.target && evt.detail.target.id;
    if (id && (!active || active === document.body)) {
      var el = document.getElementById(id);
      var target = el && focusable(el);
      if (target) { target.focus(); }
    }
  });
})();
