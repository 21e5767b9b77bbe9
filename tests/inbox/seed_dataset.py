"""The seed article's dataset statements, verbatim: its notification types and 2,000 users × 100 notifications.

Shared by the result-table tests (tests/inbox/test_seed_tables.py) and the inbox benchmark, which
build their own users first (notifications reference users 1-2,000).
"""

SEED_TYPES_SQL = """INSERT INTO notification_types
  (type, label, default_in_app, default_email, default_push, mandatory) VALUES
  ('reservation_approved', '予約の承認',       true, true,  true,  false),
  ('reservation_remind',   '利用前日のお知らせ', true, false, true,  false),
  ('comment',              'コメント',         true, false, false, false),
  ('security',             'ログイン・パスワード変更', true, true, false, true)"""

SEED_NOTIFICATIONS_SQL = """INSERT INTO notifications
   (user_id, type, title, body, link_path, dedupe_key, read_at, created_at)
   SELECT u, 'comment', '予約 #' || n || ' にコメントが付きました', '本文', '/reservations/' || n,
          'comment:' || n,
          CASE WHEN n <= 95 THEN timestamptz '2026-10-01 09:00+09' + n * interval '1 hour' END,
          timestamptz '2026-09-01 09:00+09' + n * interval '6 hours'
   FROM generate_series(1, 2000) u, generate_series(1, 100) n"""
