"""What speaking two languages costs a page: the inbox in English and in Japanese, and the time filters.

    python -m tests.perf.bench_pages [--rows 50] [--requests 300] [--rounds 3]

Uses its own database `hato_bench_pages` (dropped, created and migrated here, dropped again at the
end) on the server of DATABASE_URL, and Redis database 3 on REDIS_URL's server. Loads one type and
two members with --rows notifications each (the inbox's first page shows them all): one with no
saved language (English), one with locale "ja" and Asia/Tokyo. Then, in this one process, through
Flask's test client (no network, so the figure is the app's own CPU per page):

  (a) en    GET /inbox as the English member, --requests times
  (b) ja    the same page for the Japanese member (catalog lookups, Babel's Japanese date patterns)

alternating (a), (b) for --rounds and keeping each one's fastest round (the machine is shared). Also
times the time filters one call at a time: `localtime` and `reltime` (Babel, per language) against the
strftime formatting they replaced. Prints a table, then one JSON line (ratio = ja_ms / en_ms).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta

from tests.support.databases import bench_database

BENCH_DB = "hato_bench_pages"
BENCH_REDIS_DB = 3
TYPE = "comment"
SETUP_SQL = [
    f"""INSERT INTO notification_types (type, label, default_in_app, default_email, default_push, priority)
        VALUES ('{TYPE}', 'Comments', true, false, false, 'default')""",
    """INSERT INTO users (external_id, email, display_name, locale, timezone) VALUES
        ('bench-en', 'en@example.com', 'English Member', NULL, 'Europe/London'),
        ('bench-ja', 'ja@example.com', '山田花子', 'ja', 'Asia/Tokyo')""",
    f"""INSERT INTO notifications (user_id, type, title, body, link_path, dedupe_key, created_at, read_at)
        SELECT u.id, '{TYPE}', 'Comment ' || g || ' on reservation #' || g, 'A reply to your booking.',
               '/reservations/' || g, 'bench:' || g, now() - make_interval(mins => g * 37),
               CASE WHEN g % 3 = 0 THEN now() END
        FROM users u CROSS JOIN generate_series(1, :rows) g""",
]


def strftime_localtime(value: datetime, zone) -> str:
    """The English-only formatting the localtime filter used before issue 17."""
    return value.astimezone(zone).strftime("%a %d %b %Y, %H:%M %Z")


def per_call_us(function, calls: int = 5000) -> float:
    """Microseconds per call of function(), the fastest of three batches."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def run(args) -> dict:
    """Load the two members, time their inbox pages alternately, then the filters."""
    import sqlalchemy as sa
    from flask_babel import force_locale
    from flask_migrate import upgrade

    from app import create_app
    from app.auth import sessions
    from app.extensions import db, redis
    from app.models import User
    from app.timezones import zone
    from app.web.templating import localtime, reltime

    app = create_app({})
    figures: dict = {"rows": args.rows, "requests": args.requests, "en_ms": [], "ja_ms": []}
    with app.app_context():
        upgrade()
        redis.client().flushdb()
        for statement in SETUP_SQL:
            db.session.execute(sa.text(statement), {"rows": args.rows})
        db.session.commit()
        members = {u.external_id: (u.id, u.session_version) for u in db.session.query(User)}
    clients = {}
    for language, external_id in (("en", "bench-en"), ("ja", "bench-ja")):
        client = app.test_client()
        user_id, version = members[external_id]
        with client.session_transaction() as session:
            session.update({"_user_id": str(user_id), "_fresh": True, **sessions.stamp(user_id, version)})
        page = client.get("/inbox")
        assert page.status_code == 200, page.status_code
        figures[f"{language}_bytes"] = len(page.data)
        clients[language] = client
    assert "受信箱" in clients["ja"].get("/inbox").get_data(as_text=True)
    for _ in range(args.rounds):
        for language, client in clients.items():
            started = time.perf_counter()
            for _ in range(args.requests):
                client.get("/inbox")
            figures[f"{language}_ms"].append((time.perf_counter() - started) / args.requests * 1000)
    instant = datetime.now(UTC) - timedelta(minutes=42)
    tokyo = zone("Asia/Tokyo")
    with app.test_request_context():
        figures["strftime_us"] = per_call_us(lambda: strftime_localtime(instant, tokyo))
        for language in ("en", "ja"):
            with force_locale(language):
                figures[f"localtime_{language}_us"] = per_call_us(lambda: localtime(instant))
                figures[f"reltime_{language}_us"] = per_call_us(lambda: reltime(instant))
    return figures


def report(figures: dict) -> None:
    """Print the table and the JSON line."""
    en, ja = min(figures["en_ms"]), min(figures["ja_ms"])
    print(f"inbox page, {figures['rows']} rows, {figures['requests']} requests per round (fastest round)")
    print(f"{'':<28}{'ms/page':>10}{'bytes':>10}")
    print(f"{'(a) English member':<28}{en:>10.2f}{figures['en_bytes']:>10}")
    print(f"{'(b) Japanese member':<28}{ja:>10.2f}{figures['ja_bytes']:>10}")
    print(f"{'ratio ja / en':<28}{ja / en:>10.2f}")
    print()
    print(f"{'filter (one call)':<28}{'en µs':>10}{'ja µs':>10}")
    print(f"{'strftime (before issue 17)':<28}{figures['strftime_us']:>10.1f}{'—':>10}")
    for name in ("localtime", "reltime"):
        print(f"{name:<28}{figures[f'{name}_en_us']:>10.1f}{figures[f'{name}_ja_us']:>10.1f}")
    line = {
        "rows": figures["rows"],
        "en_ms": round(en, 3),
        "ja_ms": round(ja, 3),
        "ratio": round(ja / en, 3),
        "strftime_us": round(figures["strftime_us"], 2),
        **{k: round(v, 2) for k, v in figures.items() if k.endswith("_us") and k != "strftime_us"},
    }
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=50, help="notifications per member (the first page shows 50)")
    parser.add_argument("--requests", type=int, default=300, help="page requests per member per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with bench_database(BENCH_DB, BENCH_REDIS_DB):
        figures = run(args)
    report(figures)


if __name__ == "__main__":
    main()
