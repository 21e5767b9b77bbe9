"""Environment-driven configuration: every setting a deployment may change is read here."""

from __future__ import annotations

import os
from urllib.parse import urlsplit


def sqlalchemy_url(url: str) -> str:
    """Return the standard postgresql:// URL in the form SQLAlchemy needs for psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class Config:
    """Settings read once from the environment when the app is created."""

    def __init__(self) -> None:
        env = os.environ
        self.DATABASE_URL = env.get("DATABASE_URL", "postgresql://127.0.0.1:5432/hato")
        self.SQLALCHEMY_DATABASE_URI = sqlalchemy_url(self.DATABASE_URL)
        self.SQLALCHEMY_ENGINE_OPTIONS = {
            # Off by default: app/dbpool.py spots closed connections on checkout without a round trip.
            "pool_pre_ping": _bool("DB_POOL_PRE_PING", False),
            "pool_size": _int("DB_POOL_SIZE", 10),
            "max_overflow": _int("DB_MAX_OVERFLOW", 20),
        }
        self.REDIS_URL = env.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        self.SECRET_KEY = env.get("SECRET_KEY", "dev-insecure-change-me")
        self.BASE_URL = env.get("BASE_URL", "http://127.0.0.1:5000").rstrip("/")
        self.WS_ALLOWED_ORIGINS = [
            o.strip().rstrip("/") for o in env.get("WS_ALLOWED_ORIGINS", "").split(",") if o.strip()
        ]
        secure = urlsplit(self.BASE_URL).scheme == "https"
        self.SESSION_COOKIE_SECURE = secure
        self.REMEMBER_COOKIE_SECURE = secure
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.REMEMBER_COOKIE_HTTPONLY = True
        self.REMEMBER_COOKIE_SAMESITE = "Lax"
        self.WTF_CSRF_TIME_LIMIT = None  # the token lives as long as the session
        self.MAX_CONTENT_LENGTH = 2 * 1024 * 1024
        self.API_MAX_BODY_BYTES = _int("API_MAX_BODY_BYTES", 256 * 1024)
        self.API_RATE_LIMIT = env.get("API_RATE_LIMIT", "6000 per minute")
        # IETF RateLimit header names; Flask-Limiter's reset value is an epoch, so it keeps the X- name
        # and the API adds RateLimit-Reset in seconds (app/api/views.py).
        self.RATELIMIT_HEADER_LIMIT = "RateLimit-Limit"
        self.RATELIMIT_HEADER_REMAINING = "RateLimit-Remaining"
        self.RATELIMIT_HEADER_RESET = "X-RateLimit-Reset"
        self.LOGIN_RATE_LIMIT = env.get("LOGIN_RATE_LIMIT", "5 per minute")
        self.RATELIMIT_ENABLED = _bool("RATELIMIT_ENABLED", True)
        self.SMTP_URL = env.get("SMTP_URL", "smtp://127.0.0.1:8025")
        self.SMTP_FALLBACK_URL = env.get("SMTP_FALLBACK_URL", "")
        self.SMTP_TIMEOUT = _float("SMTP_TIMEOUT", 10.0)
        self.MAIL_FROM = env.get("MAIL_FROM", "Hato <hato@localhost>")
        self.VAPID_PUBLIC_KEY = env.get("VAPID_PUBLIC_KEY", "")
        self.VAPID_PRIVATE_KEY = env.get("VAPID_PRIVATE_KEY", "")
        self.VAPID_SUBJECT = env.get("VAPID_SUBJECT", "mailto:ops@localhost")
        self.DEFAULT_LOCALE = env.get("DEFAULT_LOCALE", "en")
        self.DEFAULT_TIMEZONE = env.get("DEFAULT_TIMEZONE", "UTC")
        self.RETRY_BASE_SECONDS = _float("RETRY_BASE_SECONDS", 2.0)
        self.RETRY_CAP_SECONDS = _float("RETRY_CAP_SECONDS", 600.0)
        self.RETRY_MAX_ATTEMPTS = _int("RETRY_MAX_ATTEMPTS", 8)
        self.DELIVERY_BATCH_SIZE = _int("DELIVERY_BATCH_SIZE", 100)
        # Campaign fanout: users per INSERT … SELECT (one transaction each); DLQ bulk actions: rows per batch.
        self.FANOUT_BATCH_SIZE = _int("FANOUT_BATCH_SIZE", 10_000)
        self.BULK_BATCH_SIZE = _int("BULK_BATCH_SIZE", 1_000)
        self.DELIVERY_LEASE_SECONDS = _int("DELIVERY_LEASE_SECONDS", 120)
        self.SWEEP_INTERVAL_SECONDS = _float("SWEEP_INTERVAL_SECONDS", 5.0)
        # A due pending row is re-enqueued by the sweeper when nobody touched it for this long.
        self.SWEEP_REQUEUE_AFTER_SECONDS = _float("SWEEP_REQUEUE_AFTER_SECONDS", 30.0)
        self.SWEEP_LIMIT = _int("SWEEP_LIMIT", 5000)
        # Provider per channel, by registry name (app/providers): smtp | fake; push has none yet.
        self.EMAIL_PROVIDER = env.get("EMAIL_PROVIDER", "smtp")
        self.PUSH_PROVIDER = env.get("PUSH_PROVIDER", "webpush")
        self.PUSH_TIMEOUT = _float("PUSH_TIMEOUT", 10.0)
        # http:// push endpoints on this machine (a local push service in tests); never in production.
        self.PUSH_ALLOW_HTTP_ENDPOINTS = _bool("PUSH_ALLOW_HTTP_ENDPOINTS", False)
        # Circuit breaker per provider (app/providers/breaker.py): opens after BREAKER_FAILURES transient
        # failures within BREAKER_WINDOW_SECONDS; one probe after BREAKER_COOLDOWN_SECONDS.
        self.BREAKER_FAILURES = _int("BREAKER_FAILURES", 5)
        self.BREAKER_WINDOW_SECONDS = _float("BREAKER_WINDOW_SECONDS", 30.0)
        self.BREAKER_COOLDOWN_SECONDS = _float("BREAKER_COOLDOWN_SECONDS", 30.0)
        self.BREAKER_PROBE_TIMEOUT_SECONDS = _float("BREAKER_PROBE_TIMEOUT_SECONDS", 30.0)
        # Token bucket per provider (app/providers/ratelimit.py): PROVIDER_RATE_<NAME> messages per second,
        # PROVIDER_BURST_<NAME> bucket size (default: one second's worth), e.g. PROVIDER_RATE_SMTP=50.
        # A worker sleeps for a token up to RATE_LIMIT_MAX_WAIT_SECONDS, else the rows wait in the ledger.
        self.RATE_LIMIT_MAX_WAIT_SECONDS = _float("RATE_LIMIT_MAX_WAIT_SECONDS", 1.0)
        for name, value in env.items():
            if name.startswith(("PROVIDER_RATE_", "PROVIDER_BURST_")):
                setattr(self, name, float(value))
