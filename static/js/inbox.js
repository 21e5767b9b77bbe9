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

  // Live list: a websocket frame with a toast means a new or re-surfaced notification. On the newest
  // page the list refreshes in place, unless keyboard focus is inside it (replacing it would drop the
  // focus): then a polite "New notifications — Show" button appears above it instead. Plain fetch, not
  // an htmx swap, so the focus handling below never runs for it: focus stays where the user left it.
  var refreshing = false, refreshAgain = false;

  function liveContent() { return document.querySelector("#inbox-content[data-live-url]"); }

  function announce(text) {
    var status = document.getElementById("inbox-status");
    if (status) { status.textContent = text; }
  }

  function refreshList(then) {
    var content = liveContent();
    if (!content) { return; }
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    fetch(content.getAttribute("data-live-url"), { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("live list " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var current = liveContent();
        var box = document.createElement("div");
        box.innerHTML = html;
        var fresh = box.querySelector("#inbox-content");
        if (!current || !fresh) { return; }
        current.replaceWith(fresh);
        if (window.htmx) { window.htmx.process(fresh); }
        refreshTimes(fresh);
        var button = document.getElementById("inbox-live-show");
        if (button) { button.remove(); }
        announce("New notifications arrived.");
        if (then) { then(); }
      })
      .catch(function () { /* the next frame (or a reload) brings the list up to date */ })
      .finally(function () {
        refreshing = false;
        if (refreshAgain) { refreshAgain = false; refreshList(); }
      });
  }

  function offerRefresh(content) {
    if (document.getElementById("inbox-live-show")) { return; }
    var button = document.createElement("button");
    button.type = "button";
    button.id = "inbox-live-show";
    button.className = "button inbox__live";
    button.textContent = "New notifications \u2014 Show";
    button.addEventListener("click", function () {
      refreshList(function () {
        var heading = document.getElementById("notifications-title");
        if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
      });
    });
    content.parentNode.insertBefore(button, content);
    announce("New notifications. Use the Show button above the list to see them.");
  }

  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    var message = evt.detail && evt.detail.message;
    var content = liveContent();
    if (!content || typeof message !== "string" || message.indexOf("data-toast") === -1) { return; }
    if (content.contains(document.activeElement)) {
      offerRefresh(content);
    } else {
      refreshList();
    }
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
