"""SQL shared by the ingest's statements (app/notify/service.py) and the aggregation's (app/notify/aggregate.py)."""

# Why a new e-mail/push ledger row is born skipped (NULL: it is pending): the thread is muted, the user has
# no e-mail address, or no live push subscription. Joined per (inserted row i, channel cell c).
SKIP_REASON_LATERAL = """  CROSS JOIN LATERAL (
    SELECT CASE
      WHEN c.muted THEN 'muted'
      WHEN c.channel = 'email' AND coalesce(c.email, '') = '' THEN 'no_email_address'
      WHEN c.channel = 'push' AND NOT EXISTS (
        SELECT 1 FROM push_subscriptions ps WHERE ps.user_id = i.user_id AND ps.invalidated_at IS NULL
      ) THEN 'no_push_subscription'
    END AS reason
  ) s
"""
