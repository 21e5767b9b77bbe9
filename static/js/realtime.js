// Live badge helpers: ack each frame, reconnect after a server's graceful close, show a signed-out session,
// let toasts go away.
(function () {
  "use strict";

  var TOAST_MS = 8000;
  var MAX_TOASTS = 5;
  var GOING_AWAY = 1001;
  var SIGNED_OUT = 4001; // this session was signed out (here, in another tab, or "sign out everywhere")
  var TOO_MANY_SOCKETS = 4008; // this user opened too many tabs; the server closed this, the oldest

  // The ws extension reconnects by itself only after 1006/1011/1012/1013. A server that shuts down
  // gracefully closes with 1001 (going away) so that we reconnect, with jitter, to another process.
  // 4001 and 4008 must never reconnect: that would sign nothing back in, or close a newer tab in turn.
  document.addEventListener("htmx:wsClose", function (evt) {
    var detail = evt.detail || {};
    var code = detail.event && detail.event.code;
    if (code === SIGNED_OUT) {
      showSignedOut(evt.target);
      return;
    }
    if (code === TOO_MANY_SOCKETS || code !== GOING_AWAY || !detail.socketWrapper) {
      return;
    }
    window.setTimeout(detail.socketWrapper.reconnect, 250 + Math.random() * 1500);
  });

  // The signed-out state: one notice with a sign-in link, and no live updates in this tab any more.
  function showSignedOut(header) {
    document.body.setAttribute("data-signed-out", "");
    if (document.getElementById("signed-out")) {
      return;
    }
    var attr = function (name) { return (header && header.getAttribute && header.getAttribute(name)) || ""; };
    var url = attr("data-login-url") || "/login";
    var notice = document.createElement("p");
    notice.id = "signed-out";
    notice.className = "alert alert--warning";
    notice.setAttribute("role", "alert");
    // The words come from the page (base.html renders them in the reader's language).
    notice.appendChild(document.createTextNode(attr("data-signed-out-text") + " "));
    var link = document.createElement("a");
    link.href = url + "?next=" + encodeURIComponent(window.location.pathname + window.location.search);
    link.textContent = attr("data-sign-in-again-text");
    notice.appendChild(link);
    var main = document.getElementById("main") || document.body;
    main.insertBefore(notice, main.firstChild);
  }

  // Ack every frame once htmx has swapped it in (app/realtime/acks.py): the server resends a frame it
  // hears nothing about, and counts the member as online only while their tab answers.
  var SEQ = /^<!--hato:seq=(\d+)-->/;
  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    var detail = evt.detail || {};
    var match = typeof detail.message === "string" && SEQ.exec(detail.message);
    if (match && detail.socketWrapper) {
      detail.socketWrapper.send(JSON.stringify({ type: "ack", seq: Number(match[1]) }));
    }
  });

  function dismiss(toast) {
    if (toast && toast.parentNode) {
      toast.parentNode.removeChild(toast);
    }
  }

  function watch(region) {
    new MutationObserver(function (records) {
      records.forEach(function (record) {
        Array.prototype.forEach.call(record.addedNodes, function (node) {
          if (node.nodeType === 1 && node.hasAttribute("data-toast")) {
            window.setTimeout(dismiss, TOAST_MS, node);
          }
        });
      });
      var toasts = region.querySelectorAll("[data-toast]");
      for (var i = 0; i < toasts.length - MAX_TOASTS; i++) {
        dismiss(toasts[i]);
      }
    }).observe(region, { childList: true });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-toast-close]");
    if (button) {
      dismiss(button.closest("[data-toast]"));
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var region = document.getElementById("toasts");
    if (region) {
      watch(region);
    }
  });
})();
