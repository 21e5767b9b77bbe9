"""Web Push: the browser's subscriptions (views, service, queries), the payload and the VAPID CLI."""
