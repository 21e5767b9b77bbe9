// Inbox and preference screens: relative times, focus after swaps, readable errors for htmx requests,
// keyboard shortcuts on the inbox and a polite announcement when the unread count changes.
// Everything here is an enhancement: the pages work without it (CSP forbids inline scripts).
// No words live here: they come from the page (templates/_inbox_words.html, rendered with the catalogs).
(function () {
  "use strict";

  var MINUTE = 60, HOUR = 3600, DAY = 86400, WEEK = 7 * DAY;

  // The reader's words, rendered by the server in their language; key → text ("" when missing).
  function word(key) {
    var box = document.getElementById("inbox-words");
    var el = box && box.content && box.content.querySelector("[data-word='" + key + "']");
    return el ? el.textContent : "";
  }

  function language() { return document.documentElement.lang || "en"; }

  var formatter = null;
  function relativeFormat() {
    if (!formatter && window.Intl && Intl.RelativeTimeFormat) {
      formatter = new Intl.RelativeTimeFormat(language(), { numeric: "always", style: "long" });
    }
    return formatter;
  }

  // Same thresholds and rounding as the server's `reltime` filter (Babel's format_timedelta, threshold 1),
  // so the first paint never jumps: "just now" under a minute, then minutes, hours, days within a week.
  function relative(seconds) {
    if (seconds < MINUTE) { return word("just-now") || null; }
    var format = relativeFormat();
    if (!format) { return null; }
    var unit = seconds < HOUR ? "minute" : seconds < DAY ? "hour" : "day";
    var size = unit === "minute" ? MINUTE : unit === "hour" ? HOUR : DAY;
    var text = format.format(-Math.max(1, Math.round(seconds / size)), unit);
    // Japanese reads "5分前", not ICU's "5 分前" (the server tidies the same gap).
    return language() === "ja" ? text.replace(/(\d)\s+(?=[\u3040-\u30ff\u4e00-\u9fff])/g, "$1") : text;
  }

  // Older times keep the server's local-date text; the absolute time stays in the title (hover).
  function refreshTimes(root) {
    if (!root || !root.querySelectorAll) { return; }
    var now = Date.now();
    root.querySelectorAll("time[data-relative]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) { return; }
      var seconds = Math.max(0, (now - at) / 1000);
      if (seconds >= WEEK) { return; }
      var text = relative(seconds);
      if (text && el.textContent !== text) { el.textContent = text; }
    });
  }

  // A failed htmx request's explanation by HTTP status (0: the server could not be reached).
  function errorMessage(status) {
    return word("error-" + status) || word("error-other");
  }

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
    close.setAttribute("aria-label", word("dismiss"));
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

  // A form marked data-swap-422 shows the server's explanation in place instead of failing silently (and one
  // marked data-swap-429 its rate limit's, when the server answers with the form again).
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    var status = evt.detail.xhr.status;
    if (elt && ((status === 422 && elt.closest("[data-swap-422]")) || (status === 429 && elt.closest("[data-swap-429]")))) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail.xhr.status;
    toast(errorMessage(status));
  });

  document.addEventListener("htmx:sendError", function () { toast(errorMessage(0)); });

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
        announce(word("live-arrived"));
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
    button.textContent = word("live-show");
    button.addEventListener("click", function () {
      refreshList(function () {
        var heading = document.getElementById("notifications-title");
        if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
      });
    });
    content.parentNode.insertBefore(button, content);
    announce(word("live-offer"));
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
    var lost = !active || active === document.body;
    var id = evt.detail.target && evt.detail.target.id;
    var plan = focusPlan && focusPlan.target === id ? focusPlan : null;
    if (plan) { focusPlan = null; }
    if (plan && plan.archived && id === plan.row) {
      // An archived row stays, greyed, with "Move to inbox": carry on with the next row, as a mail client does.
      var row = document.getElementById(plan.row);
      var next = row && (nextRow(row, 1) || nextRow(row, -1) || row);
      if (next && (lost || row.contains(active))) { next.focus(); }
      return;
    }
    if (plan && lost && plan.row && document.getElementById(plan.row)) {
      document.getElementById(plan.row).focus();  // the list was redrawn (mark all read): same row again
      return;
    }
    if (id && lost) {
      var el = document.getElementById(id);
      var target = el && focusable(el);
      if (target) { target.focus(); }
    }
  });

  // ---------- keyboard: j/k rows, Enter opens, e archives, Shift+I marks all read, ? lists them -------------
  // Which row had focus when a request started, and whether it archives it (see htmx:afterSettle above).
  var focusPlan = null;

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    var active = document.activeElement;
    var row = active && active.closest && active.closest("#inbox-content li.item");
    var path = (evt.detail.requestConfig && evt.detail.requestConfig.path) || "";
    focusPlan = {
      target: evt.detail.target ? evt.detail.target.id : null,
      row: row ? row.id : null,
      archived: /\/archive$/.test(path) && !!elt && !!elt.closest && !!elt.closest("li.item") &&
        (!row || elt.closest("li.item") === row)
    };
    if (focusPlan.archived && !row) { focusPlan.row = elt.closest("li.item").id; }
  });

  function rows() {
    // Rows folded away (the announcements behind a closed "N more announcements") cannot take focus: j/k skip them.
    return Array.prototype.slice.call(document.querySelectorAll("#inbox-content li.item")).filter(function (row) {
      return !row.closest("details:not([open])");
    });
  }

  function currentRow() {
    var active = document.activeElement;
    return active && active.closest ? active.closest("#inbox-content li.item") : null;
  }

  function nextRow(row, step) {
    var all = rows();
    var at = all.indexOf(row);
    return at === -1 ? null : all[at + step] || null;
  }

  function closeMenus(except) {
    document.querySelectorAll("#inbox-content details.menu[open]").forEach(function (menu) {
      if (menu !== except) { menu.open = false; }
    });
  }

  function focusRow(row) {
    if (!row) { return; }
    closeMenus(null);
    if (!row.hasAttribute("tabindex")) { row.setAttribute("tabindex", "-1"); }
    row.focus();
  }

  function typing(el) {
    if (!el || !el.closest) { return false; }
    return el.isContentEditable || !!el.closest("input, textarea, select, [contenteditable]");
  }

  function openShortcuts() {
    var dialog = document.getElementById("shortcuts");
    if (!dialog || dialog.open || typeof dialog.showModal !== "function") { return; }
    var opener = document.activeElement;
    dialog.showModal();
    dialog.addEventListener("close", function restore() {
      dialog.removeEventListener("close", restore);
      // The browser usually puts focus back itself, and the "close" event is a queued task: keys pressed in
      // between (j/k) may already have moved on, so only step in when focus was really lost.
      var active = document.activeElement;
      var lost = !active || active === document.body || dialog.contains(active);
      if (lost && opener && opener.isConnected && opener.focus) { opener.focus(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var hint = document.querySelector("[data-shortcuts-hint]");
    if (hint && document.getElementById("shortcuts")) { hint.hidden = false; }
  });

  document.addEventListener("click", function (evt) {
    if (evt.target.closest && evt.target.closest("[data-open-shortcuts]")) { openShortcuts(); }
  });

  function click(el) {
    if (el && !el.disabled) { el.click(); return true; }
    return false;
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.defaultPrevented || evt.isComposing || evt.ctrlKey || evt.metaKey || evt.altKey) { return; }
    // Escape in a row's open "More" menu closes it and returns to its toggle (also from the snooze field).
    var menu = evt.key === "Escape" && evt.target.closest && evt.target.closest("details.menu[open]");
    if (menu) {
      menu.open = false;
      var toggle = menu.querySelector("summary");
      if (toggle) { toggle.focus(); }
      evt.preventDefault();
      return;
    }
    if (!document.getElementById("inbox-content") || typing(evt.target)) { return; }
    var dialog = document.getElementById("shortcuts");
    if (dialog && dialog.open) { return; }  // the dialog's own keys (Escape closes it)
    var key = evt.key;
    var row = currentRow();
    var done = false;
    if (key === "?") {
      openShortcuts();
      done = true;
    } else if (key === "I" && evt.shiftKey) {
      done = click(document.querySelector("form[action$='/read-all'] button[type=submit]"));
    } else if (evt.shiftKey) {
      return;
    } else if (key === "j" || key === "k") {
      var all = rows();
      if (!all.length) { return; }
      var target = row ? nextRow(row, key === "j" ? 1 : -1) : (key === "j" ? all[0] : all[all.length - 1]);
      focusRow(target || row);
      done = true;
    } else if (key === "Enter" && row && evt.target === row) {
      done = click(row.querySelector(".item__link"));
    } else if (key === "e" && row) {
      done = click(row.querySelector("form[action$='/archive'] button[type=submit]"));
    }
    if (done) { evt.preventDefault(); }
  });

  // ---------- the unread count, announced politely once per change -----------------------------------------
  // The badge is redrawn by every websocket frame and htmx swap; reading it out each time would be noise.
  // Only a higher count than the last one announced (something arrived) is spoken, in #badge-live.
  var lastCount = null;

  function badgeCount() {
    var badge = document.getElementById("inbox-badge");
    var count = badge ? parseInt(badge.getAttribute("data-count"), 10) : NaN;
    return { badge: badge, count: count };
  }

  function watchBadge() {
    var now = badgeCount();
    if (isNaN(now.count)) { return; }
    if (lastCount !== null && now.count > lastCount) {
      var live = document.getElementById("badge-live");
      var label = now.badge.getAttribute("aria-label") || now.badge.textContent;
      if (live && label) { live.textContent = label; }
    }
    lastCount = now.count;
  }

  document.addEventListener("DOMContentLoaded", watchBadge);
  document.addEventListener("htmx:oobAfterSwap", watchBadge);
  document.addEventListener("htmx:wsAfterMessage", function () { window.setTimeout(watchBadge, 0); });
})();
