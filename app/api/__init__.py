"""The JSON API for product services under /v1: bearer API keys, idempotency keys, problem+json errors, OpenAPI 3.1."""
