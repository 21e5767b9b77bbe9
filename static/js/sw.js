/* Hato service worker: shows Web Push messages and opens their link on click.
   The payload is JSON {title, body, url, tag[, actions]} (app/push/payload.py). actions (issue 33) are the
   notification's buttons {action, title, url[, post]}: a link button opens its url; a named action (post)
   posts to url + "/push" with the member's session (app/actions/views.py) and, when that is refused (signed
   out, another member), opens url, the action's confirm page. */
"use strict";

self.addEventListener("install", function () {
  self.skipWaiting();
});

self.addEventListener("activate", function (event) {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("push", function (event) {
  var data = {};
  if (event.data) {
    try {
      data = event.data.json();
    } catch (err) {
      data = { body: event.data.text() };  // not JSON: still show what came
    }
  }
  var buttons = Array.isArray(data.actions) ? data.actions : [];
  var options = { body: data.body || "", data: { url: data.url || "/inbox", actions: buttons } };
  if (buttons.length) {
    options.actions = buttons.map(function (b) { return { action: b.action, title: b.title }; });
  }
  if (data.tag) {
    options.tag = data.tag;  // a resend of the same notification replaces it instead of stacking
  }
  event.waitUntil(self.registration.showNotification(data.title || "Hato", options));
});

function sameOrigin(url) {
  return new URL(url, self.location.origin).origin === self.location.origin;
}

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var data = event.notification.data || {};
  var button = event.action && (data.actions || []).find(function (b) { return b.action === event.action; });
  if (button && button.post && sameOrigin(button.url)) {
    event.waitUntil(fetch(button.url + "/push", { method: "POST", credentials: "same-origin" }).then(function (r) {
      return r.ok ? null : openUrl(button.url);
    }, function () { return openUrl(button.url); }));
    return;
  }
  event.waitUntil(openUrl((button && button.url) || data.url || "/inbox"));
});

function openUrl(url) {
  var target = new URL(url, self.location.origin).href;
  return self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (windows) {
    var exact = windows.find(function (client) { return client.url === target; });
    if (exact) {
      return exact.focus();
    }
    // Reuse an open Hato tab rather than opening yet another one.
    var ours = windows.find(function (client) { return new URL(client.url).origin === self.location.origin; });
    if (ours && new URL(target).origin === self.location.origin) {
      return ours.focus().then(function (client) { return client.navigate(target); });
    }
    return self.clients.openWindow(target);
  });
}
