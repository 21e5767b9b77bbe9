/* Hato service worker: shows Web Push messages and opens their link on click.
   The payload is JSON {title, body, url, tag} (app/push/payload.py). */
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
  var options = { body: data.body || "", data: { url: data.url || "/inbox" } };
  if (data.tag) {
    options.tag = data.tag;  // a resend of the same notification replaces it instead of stacking
  }
  event.waitUntil(self.registration.showNotification(data.title || "Hato", options));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var url = (event.notification.data && event.notification.data.url) || "/inbox";
  var target = new URL(url, self.location.origin).href;
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (windows) {
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
  }));
});
