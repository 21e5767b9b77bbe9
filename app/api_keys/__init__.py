"""API keys for product services: `hato_…` bearer keys; only a SHA-256 hash and a short prefix are stored."""
