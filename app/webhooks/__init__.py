"""Webhooks out to the product: endpoints, the outbox of signed events, and their delivery."""
