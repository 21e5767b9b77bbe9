"""E-mail digests: hourly or daily, per user and type, exactly once per (user, period)."""
