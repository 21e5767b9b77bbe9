"""Endpoints for the people and machines that run Hato: /healthz and /metrics (Prometheus)."""
