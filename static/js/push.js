/* Preferences page: turn Web Push on or off for this browser.
   Subscribes with the server's public VAPID key, then stores the subscription with
   POST /push/subscriptions (DELETE to remove it). The service worker is /sw.js. */
(function () {
  "use strict";

  var section = document.getElementById("push");
  if (!section || !section.querySelector("[data-push-subscribe]")) {
    return;  // no page section, or push is not configured on this server
  }
  var statusEl = section.querySelector("[data-push-status]");
  var onButton = section.querySelector("[data-push-subscribe]");
  var offButton = section.querySelector("[data-push-unsubscribe]");
  var csrf = section.getAttribute("data-csrf");

  // Every sentence comes from the page, in the reader's language (data-text-*; "{reason}" is filled in here).
  function text(name, reason) {
    var words = section.getAttribute("data-text-" + name) || "";
    return reason === undefined ? words : words.replace("{reason}", reason);
  }

  function say(words) {
    statusEl.textContent = words;
  }

  function show(subscribed) {
    onButton.hidden = subscribed;
    offButton.hidden = !subscribed;
  }

  function keyBytes(base64url) {
    var padded = base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4);
    var raw = atob(padded);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i += 1) {
      bytes[i] = raw.charCodeAt(i);
    }
    return bytes;
  }

  function send(method, body) {
    return fetch("/push/subscriptions", {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body)
    });
  }

  function busy(flag) {
    onButton.disabled = flag;
    offButton.disabled = flag;
  }

  async function subscribe() {
    busy(true);
    try {
      var permission = await Notification.requestPermission();
      if (permission !== "granted") {
        say(text("blocked"));
        return;
      }
      var keyResponse = await fetch("/push/vapid-public-key", { credentials: "same-origin" });
      if (!keyResponse.ok) {
        say(text("not-configured"));
        return;
      }
      var publicKey = (await keyResponse.json()).publicKey;
      var registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
      var subscription = await registration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(publicKey)
      });
      var saved = await send("POST", subscription.toJSON ? subscription.toJSON() : subscription);
      if (saved.status === 409) {
        // This browser's subscription belongs to another account (someone signed in here before):
        // the server never moves it, so drop it and subscribe afresh, which gives a new endpoint.
        await subscription.unsubscribe();
        subscription = await registration.pushManager.subscribe({
          userVisibleOnly: true,
          applicationServerKey: keyBytes(publicKey)
        });
        saved = await send("POST", subscription.toJSON ? subscription.toJSON() : subscription);
      }
      if (!saved.ok) {
        var problem = await saved.json().catch(function () { return {}; });
        say(text("save-failed", problem.detail || String(saved.status)));
        return;
      }
      show(true);
      say(text("on"));
    } catch (err) {
      say(text("on-failed", err.message));
    } finally {
      busy(false);
    }
  }

  async function unsubscribe() {
    busy(true);
    try {
      var registration = await navigator.serviceWorker.getRegistration("/");
      var subscription = registration && await registration.pushManager.getSubscription();
      if (subscription) {
        await send("DELETE", { endpoint: subscription.endpoint });
        await subscription.unsubscribe();
      }
      show(false);
      say(text("off"));
    } catch (err) {
      say(text("off-failed", err.message));
    } finally {
      busy(false);
    }
  }

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    onButton.hidden = true;
    say(text("unsupported"));
    return;
  }
  onButton.addEventListener("click", subscribe);
  offButton.addEventListener("click", unsubscribe);
  navigator.serviceWorker.getRegistration("/").then(function (registration) {
    return registration ? registration.pushManager.getSubscription() : null;
  }).then(function (subscription) {
    show(Boolean(subscription));
    say(text(subscription ? "on" : "off"));
  }).catch(function () {
    show(false);
  });
}());
