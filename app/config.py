"""Environment-driven configuration: every setting a deployment may change is read here."""
from __future__ import annotations

import os
from urllib.parse import urlsplit


def sqlalchemy_url(url: str) -> str:
    """Return the standard postgresql:// URL in the form SQLAlchemy needs for psycopg 3."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
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
            "pool_pre_ping": True,
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
        self.DELIVERY_LEASE_SECONDS = _int("DELIVERY_LEASE_SECONDS", 120)
        self.SWEEP_INTERVAL_SECONDS = _float("SWEEP_INTERVAL_SECONDS", 5.0)
