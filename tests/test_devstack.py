"""Pure helpers of the dev supervisor (app/devstack.py): URL rewriting and CLI detection."""

from __future__ import annotations

import pytest

from app import devstack


@pytest.mark.parametrize(
    ("url", "name", "expected"),
    [
        ("postgresql://postgres@127.0.0.1:5432/hato", "hato_test", "postgresql://postgres@127.0.0.1:5432/hato_test"),
        (
            "postgresql://postgres:@/hato?host=/srv/var/pg",
            "hato_test",
            "postgresql://postgres:@/hato_test?host=/srv/var/pg",
        ),
        ("postgresql+psycopg://u:p@db:5432/app", "postgres", "postgresql://u:p@db:5432/postgres"),
        ("postgres://u@db/app", "hato_bench", "postgresql://u@db/hato_bench"),
    ],
)
def test_pg_url_with_database_keeps_the_server(url, name, expected):
    assert devstack.pg_url_with_database(url, name) == expected


@pytest.mark.parametrize(
    ("url", "db", "expected"),
    [
        ("redis://127.0.0.1:6379/0", 15, "redis://127.0.0.1:6379/15"),
        ("redis://:secret@cache:6379", 14, "redis://:secret@cache:6379/14"),
        ("unix:///tmp/x/redis.socket", 15, "unix:///tmp/x/redis.socket?db=15"),
        ("unix:///tmp/x/redis.socket?db=0", 15, "unix:///tmp/x/redis.socket?db=15"),
    ],
)
def test_redis_url_with_db_switches_only_the_number(url, db, expected):
    assert devstack.redis_url_with_db(url, db) == expected


def test_redact_hides_passwords_only():
    assert devstack.redact("postgresql://u:s3cret@db/app") == "postgresql://u:***@db/app"
    assert devstack.redact("redis://127.0.0.1:6379/15") == "redis://127.0.0.1:6379/15"


def test_cli_has_command_reads_flask_help():
    help_text = "Commands:\n  db       Perform database migrations.\n  worker   Run an RQ worker\n  sweep\n"
    assert devstack.cli_has_command(help_text, "worker")
    assert devstack.cli_has_command(help_text, "sweep")
    assert not devstack.cli_has_command(help_text, "swe")
    assert not devstack.cli_has_command("Usage: flask [OPTIONS] COMMAND\n  Run a worker\n", "sweeper")


def test_split_args_drops_the_separator():
    assert devstack.split_args(["test", "--", "-x", "tests/inbox"]) == ("test", ["-x", "tests/inbox"])
    assert devstack.split_args(["test", "--"]) == ("test", [])
    assert devstack.split_args(["run"]) == ("run", [])


def test_gunicorn_uses_the_realtime_config_on_port_5000():
    args = devstack.GUNICORN_ARGS
    assert "wsgi:app" in args
    assert args[args.index("-c") + 1] == "python:app.realtime.gunicorn_conf"
    assert args[args.index("--bind") + 1] == "127.0.0.1:5000"


def test_the_realtime_config_runs_gthread():
    from app.realtime import gunicorn_conf

    assert gunicorn_conf.worker_class == "app.realtime.gunicorn_conf.SocketThreadWorker"  # gthread, see there
    assert gunicorn_conf.threads > gunicorn_conf.workers
