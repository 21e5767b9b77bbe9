"""The soak's data: members reachable on every channel, the types the traffic sends, a topic and a workflow.

Every member has an e-mail address, a verified phone number with SMS consent, an iPhone and an Android phone,
and a Slack DM, a LINE friend, a Teams flow and a Discord webhook. Three types:
- `soak-all` goes on every channel at once (e-mail, push, SMS, chat), and in-app;
- `soak-flow` sends an SMS, which its workflow holds FLOW_DELAY_SECONDS after the in-app row;
- `soak-topic` e-mails the members following the topic TOPIC (all of them), one fanout per post.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa

from app.devices import service as devices
from app.extensions import db
from app.topics import service as topics
from app.users import chat_accounts
from app.workflows import service as workflows

TOPIC = "soak-everyone"
FLOW_DELAY_SECONDS = 15
# The channels each type is due on (besides in-app), what the soak checks at the end.
DUE = {"soak-all": ("email", "push", "sms", "chat"), "soak-flow": ("sms",), "soak-topic": ("email",)}

TYPES_SQL = """INSERT INTO notification_types (type, label, priority, default_channels) VALUES
    ('soak-all', 'Soak: every channel', 'default', '{email,push,sms,chat}'),
    ('soak-flow', 'Soak: a workflow with a delay', 'default', '{sms}'),
    ('soak-topic', 'Soak: a topic', 'default', '{email}')"""
USERS_SQL = """INSERT INTO users (email, display_name, external_id, timezone, phone, phone_verified_at, sms_opt_in,
                                  sms_opt_in_at, sms_consent_source)
    SELECT 'soak' || g || '@example.com', 'Soak ' || g, 'soak-' || g, 'UTC', '+8190' || lpad(g::text, 8, '0'),
           now(), true, now(), 'api'
    FROM generate_series(1, :users) g RETURNING id"""
FLOW = {"steps": [{"kind": "channel", "channel": "in_app"},
                  {"kind": "delay", "seconds": FLOW_DELAY_SECONDS},
                  {"kind": "channel", "channel": "sms"}]}  # fmt: skip


def seed(users: int, slack_prefix: str, teams_url: str, discord_url: str) -> list[int]:
    """Create the members, types, topic and workflow; return the members' ids (committed)."""
    db.session.execute(sa.text(TYPES_SQL))
    ids = list(db.session.execute(sa.text(USERS_SQL), {"users": users}).scalars())
    for user_id in ids:
        _reachable_everywhere(user_id, slack_prefix, teams_url, discord_url)
    workflows.save_draft(None, "soak-flow", FLOW)
    workflows.publish(None, "soak-flow", "the soak's delayed SMS")
    topics.put_topic(TOPIC, "Everyone in the soak", "")
    topics.change_subscribers(TOPIC, [f"soak-{n}" for n in range(1, users + 1)], [])
    db.session.commit()
    return ids


def _reachable_everywhere(user_id: int, slack_prefix: str, teams_url: str, discord_url: str) -> None:
    apns_token = hashlib.sha256(f"soak iphone {user_id}".encode()).hexdigest()  # 32 bytes in hex, as APNs's
    devices.register(user_id, {"platform": "ios", "token": apns_token})
    devices.register(user_id, {"platform": "android", "token": f"soak-android:{user_id}"})
    chat_accounts.put_account(user_id, "slack", {"channel": f"{slack_prefix}{user_id}"})
    chat_accounts.put_account(
        user_id, "line", {"user_id": "U" + hashlib.sha256(str(user_id).encode()).hexdigest()[:32]}
    )
    chat_accounts.put_account(user_id, "msteams", {"webhook_url": teams_url})
    chat_accounts.put_account(user_id, "discord", {"webhook_url": discord_url})
