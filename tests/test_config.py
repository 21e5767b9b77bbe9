"""Settings: every one declared once, read with its type, checked for range and combinations, documented."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
import sqlalchemy.dialects.postgresql.psycopg

from app.config import SETTINGS, Config, check
from app.providers.registry import registered_names
from tests.support.docs import doc_page

GOOD = {"SECRET_KEY": "k" * 48, "HATO_DEV": "0"}


def problems(**env) -> list[str]:
    config = Config({**GOOD, **env})
    return check(vars(config), registered_names())


def test_the_defaults_with_a_real_secret_can_run():
    assert problems() == []


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DB_POOL_SIZE": "ten"}, "DB_POOL_SIZE='ten' is not an integer from 1 to 1,000"),
        ({"DB_POOL_SIZE": "0"}, "DB_POOL_SIZE=0 is out of range: an integer from 1 to 1,000"),
        ({"RETRY_CAP_SECONDS": "nan"}, "RETRY_CAP_SECONDS='nan' is not a number"),
        ({"RETRY_MAX_ATTEMPTS": "1e3"}, "RETRY_MAX_ATTEMPTS='1e3' is not an integer"),
        ({"BREAKER_FAILURES": "0"}, "BREAKER_FAILURES=0 is out of range"),
        ({"BREAKER_FAILURES": "2000000"}, "BREAKER_FAILURES=2,000,000 is out of range: an integer from 1 to 1,000,000"),
        ({"RATELIMIT_ENABLED": "maybe"}, "RATELIMIT_ENABLED='maybe' is not true or false"),
        ({"LOGIN_RATE_LIMIT": "five a minute"}, "LOGIN_RATE_LIMIT='five a minute' is not a rate"),
        ({"PROVIDER_RATE_SMTP": "fast"}, "PROVIDER_RATE_SMTP='fast' is not a number"),
        ({"PROVIDER_RATE_SMTP": "-1"}, "PROVIDER_RATE_SMTP=-1 is out of range"),
        ({"BASE_URL": "example.com"}, "BASE_URL='example.com' is not a URL starting with http:// or https://"),
        ({"DATABASE_URL": "mysql://x/y"}, "DATABASE_URL='mysql://x/y' is not a URL"),
        ({"SMTP_URL": "http://mail"}, "SMTP_URL='http://mail' is not a URL"),
        ({"WS_ALLOWED_ORIGINS": "app.example.com"}, "WS_ALLOWED_ORIGINS='app.example.com' is not a URL"),
        ({"DEFAULT_TIMEZONE": "Tokyo"}, "DEFAULT_TIMEZONE='Tokyo' is not an IANA time zone"),
        ({"REDIS_NAMESPACE": "a b"}, "REDIS_NAMESPACE='a b' must be"),
        ({"VAPID_SUBJECT": "ops@example.com"}, "VAPID_SUBJECT='ops@example.com' must start with mailto:"),
        ({"EMAIL_PROVIDER": "sendgrid"}, "EMAIL_PROVIDER='sendgrid': no provider called sendgrid"),
        ({"METRICS_TOKEN": "short"}, "METRICS_TOKEN is shorter than 16 characters"),
        ({"BADGE_COUNTS": "unred"}, "BADGE_COUNTS='unred' must be unread or unseen"),
    ],
)
def test_a_bad_value_is_named_with_what_it_accepts(env, expected):
    found = problems(**env)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize("lease", ["5", "3", "1"])
def test_a_lease_at_or_below_the_workers_margin_is_refused(lease):
    # Every batch would stop before its first row and release everything unsent, forever, silently.
    found = problems(DELIVERY_LEASE_SECONDS=lease)
    assert any(p.startswith(f"DELIVERY_LEASE_SECONDS={lease} must be more than LEASE_MARGIN_SECONDS=5") for p in found)


def test_a_lease_shorter_than_one_send_is_refused():
    found = problems(DELIVERY_LEASE_SECONDS="12", SMTP_TIMEOUT="30")
    assert any("a row could be sent twice" in p for p in found), found


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"RETRY_BASE_SECONDS": "900", "RETRY_CAP_SECONDS": "600"},
            "RETRY_BASE_SECONDS is larger than RETRY_CAP_SECONDS",
        ),
        ({"VAPID_PUBLIC_KEY": "abc"}, "VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY go together"),
        ({"SMTP_FALLBACK_URL": "smtp://127.0.0.1:8025"}, "SMTP_FALLBACK_URL is the same server as SMTP_URL"),
    ],
)
def test_combinations_that_cannot_work_are_refused(env, expected):
    assert any(p.startswith(expected) for p in problems(**env))


def test_every_problem_is_reported_at_once():
    found = problems(DB_POOL_SIZE="x", SWEEP_LIMIT="0", SECRET_KEY="")
    assert len(found) == 3


def test_several_realtime_hosts_are_seeds_of_a_cluster_only():
    seeds = "redis://10.0.0.11:7000,10.0.0.12:7000/0"
    assert any("several hosts" in found for found in problems(REALTIME_REDIS_URL=seeds))
    assert not any("several hosts" in found for found in problems(REALTIME_REDIS_URL=seeds, REALTIME_REDIS_CLUSTER="1"))


def test_values_are_read_with_their_types():
    config = Config({"DB_POOL_SIZE": "7", "PUSH_TIMEOUT": "2.5", "RATELIMIT_ENABLED": "off", "HATO_DEV": "yes"})
    assert (config.DB_POOL_SIZE, config.PUSH_TIMEOUT, config.RATELIMIT_ENABLED, config.DEV_MODE) == (
        7,
        2.5,
        False,
        True,
    )
    assert config.SQLALCHEMY_ENGINE_OPTIONS["pool_size"] == 7


def test_every_setting_is_declared_once_and_its_default_is_in_range():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for setting in SETTINGS:
        if setting.kind in ("int", "float"):
            assert setting.low <= setting.default <= setting.high, setting.name


def test_the_docs_configuration_table_lists_every_setting():
    table = doc_page("configuration.md")
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    missing = [s.name for s in SETTINGS if s.name not in documented]
    assert missing == []


def test_a_multi_host_database_url_keeps_libpqs_host_list():
    from app.config import sqlalchemy_url

    url = sqlalchemy_url("postgresql://u:p%40w@h1:5432,h2:5433,[::1]/hato?target_session_attrs=read-write")
    assert (
        url == "postgresql+psycopg://u:p%40w@/hato?host=h1,h2,::1&port=5432,5433,5432&target_session_attrs=read-write"
    )
    args = sa.dialects.postgresql.psycopg.dialect().create_connect_args(sa.engine.make_url(url))[1]
    assert (args["host"], args["port"], args["password"]) == ("h1,h2,::1", "5432,5433,5432", "p@w")
    assert args["target_session_attrs"] == "read-write"
    assert sqlalchemy_url("postgresql://u@h1:5432/hato") == "postgresql+psycopg://u@h1:5432/hato"


def test_a_multi_host_database_url_is_accepted_and_names_one_namespace():
    url = "postgresql://hato@pg1:5432,pg2:5432/hato?target_session_attrs=read-write"
    assert problems(DATABASE_URL=url) == []
    assert Config({"DATABASE_URL": url}).REDIS_NAMESPACE.startswith("hato-")
