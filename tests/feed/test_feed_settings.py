"""The feed's settings are checked at start-up like every other (issue 19)."""

from __future__ import annotations

import pytest

from app.config import Config, check
from app.providers.registry import registered_names

GOOD = {"SECRET_KEY": "k" * 48, "HATO_DEV": "0"}


def problems(**env) -> list[str]:
    return check(vars(Config({**GOOD, **env})), registered_names())


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"FEED_ALLOWED_ORIGINS": "app.example.com"}, "FEED_ALLOWED_ORIGINS='app.example.com' is not a URL"),
        ({"FEED_CONNECT_RATE_LIMIT": "lots"}, "FEED_CONNECT_RATE_LIMIT='lots' is not a rate"),
        ({"USER_TOKEN_MAX_TTL": "30"}, "USER_TOKEN_MAX_TTL=30 is out of range"),
    ],
)
def test_a_bad_feed_setting_stops_the_start(env, expected):
    found = problems(**env)
    assert any(p.startswith(expected) for p in found), found


def test_allowed_origins_are_a_list_without_trailing_slashes():
    config = Config({**GOOD, "FEED_ALLOWED_ORIGINS": "https://app.example.com/, http://127.0.0.1:5001"})
    assert config.FEED_ALLOWED_ORIGINS == ["https://app.example.com", "http://127.0.0.1:5001"]
    assert problems(FEED_ALLOWED_ORIGINS="https://app.example.com/, http://127.0.0.1:5001") == []
