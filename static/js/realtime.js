// Live badge helpers: reconnect after a server's graceful close, and let toasts go away.
(function () {
  "use strict";

  var TOAST_MS = 8000;
  var MAX_TOASTS = 5;
  var GOING_AWAY = 1001;

  // The ws extension reconnects by itself only after 1006/1011/1012/1013. A server that shuts down
  // gracefully closes with 1001 (going away) so that we reconnect, with jitter, to another process.
  document.addEventListener("htmx:wsClose", function (evt) {
    var detail = evt.detail || {};
    if (!detail.event || detail.event.code !== GOING_AWAY || !detail.socketWrapper) {
      return;
    }
    window.setTimeout(detail.socketWrapper.reconnect, 250 + Math.random() * 1500);
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
