"""The demo's data: its types, accounts, wording in English and Japanese, alice's phones and the announcements.

app/cli/demo.py seeds them (`flask --app wsgi demo seed`); type labels and notification titles are data, not
catalog entries.
"""

from __future__ import annotations

import hashlib

# The seed article's types and defaults (type, label, in_app, email, push, mandatory) + priority.
DEMO_TYPES = [
    (
        "reservation_approved",
        "Reservation approved",
        True,
        True,
        True,
        False,
        "default",
        "A reservation you made was approved.",
    ),
    (
        "reservation_remind",
        "Reminder the day before",
        True,
        False,
        True,
        False,
        "default",
        "A reminder the day before you use a reservation.",
    ),
    ("comment", "Comment", True, False, False, False, "low", "Someone commented on your reservation."),
    (
        "security",
        "Sign-in and password changes",
        True,
        True,
        False,
        True,
        "high",
        "Security events on your account. These cannot be turned off.",
    ),
]

# Their Japanese label and description (issue 33): Alice (ja-jp) reads these on her preference screen.
DEMO_TYPES_JA = {
    "reservation_approved": ("予約の承認", "あなたの予約が承認されました。"),
    "reservation_remind": ("前日のリマインダー", "予約の利用日の前日にお知らせします。"),
    "comment": ("コメント", "あなたの予約にコメントが付きました。"),
    "security": ("サインインとパスワードの変更", "アカウントのセキュリティに関するお知らせです。オフにはできません。"),
}

DEMO_ACCOUNTS = [
    {
        "email": "alice@example.com",
        "password": "hato-alice-demo",
        "role": "member",
        "name": "Alice Member",
        "external_id": "demo-alice",
        "timezone": "Asia/Tokyo",
        "locale": "en",
    },
    {
        "email": "hanako@example.com",
        "password": "hato-hanako-demo",
        "role": "member",
        "name": "山田花子",
        "external_id": "demo-hanako",
        "timezone": "Asia/Tokyo",
        "locale": "ja",
    },
    {
        "email": "bob@example.com",
        "password": "hato-bob-demo",
        "role": "member",
        "name": "Bob Member",
        "external_id": "demo-bob",
        "timezone": "Europe/Berlin",
        "locale": "de",
    },
    {
        "email": "carol@example.com",
        "password": "hato-carol-demo",
        "role": "member",
        "name": "Carol Member",
        "external_id": "demo-carol",
        "timezone": "America/New_York",
        "locale": "en",
    },
    {
        "email": "olivia@example.com",
        "password": "hato-olivia-demo",
        "role": "operator",
        "name": "Olivia Operator",
        "external_id": "demo-olivia",
        "timezone": "UTC",
        "locale": "en",
    },
    {
        "email": "adam@example.com",
        "password": "hato-adam-demo",
        "role": "admin",
        "name": "Adam Admin",
        "external_id": "demo-adam",
        "timezone": "UTC",
        "locale": "en",
    },
]

NOTIFICATIONS_PER_MEMBER = 30
UNREAD_PER_MEMBER = 6

# What each demo type's notifications say, by the member's language (English for every other one).
DEMO_WORDING = {
    "en": {
        "titles": {
            "reservation_approved": "Reservation #{n} was approved",
            "comment": "New comment on reservation #{n}",
            "reservation_remind": "Tomorrow: projector for reservation #{n}",
            "security": "New sign-in to your account",
        },
        "body": "Open it to see the details.",
    },
    # The requirement documents' examples (the seed article's 予約 #310 が承認されました, コメントが付きました).
    "ja": {
        "titles": {
            "reservation_approved": "予約 #{n} が承認されました",
            "comment": "予約 #{n} にコメントが付きました",
            "reservation_remind": "明日のご利用：予約 #{n}（プロジェクター）",
            "security": "アカウントに新しいログインがありました",
        },
        "body": "開いて詳細をご確認ください。",
    },
}


def _ja_email(lead: str, closing: str = "") -> str:
    """A Japanese text body: the greeting, a lead sentence, the notification, a closing, its link."""
    return (
        "{{ user.name }} 様\n\n" + lead + "\n\n{{ notification.title }}\n{{ notification.body }}"
        + (f"\n\n{closing}" if closing else "")
        + "{% if notification.link %}\n\n詳細はこちら：{{ notification.link }}{% endif %}\n"
    )  # fmt: skip


# Japanese e-mail wording of the demo types (type, subject, text body); the HTML part is made from the text.
DEMO_TEMPLATES_JA = [
    ("reservation_approved", "【予約の承認】{{ notification.title }}", _ja_email("ご予約が承認されました。")),
    ("reservation_remind", "【利用前日のお知らせ】{{ notification.title }}", _ja_email("明日はご予約の利用日です。")),
    ("comment", "【コメント】{{ notification.title }}", _ja_email("ご予約に新しいコメントが付きました。")),
    (
        "security",
        "【重要】{{ notification.title }}",
        _ja_email(
            "アカウントのセキュリティに関するお知らせです。",
            "心当たりがない場合は、すぐにパスワードを変更してください。",
        ),
    ),
]


# Alice's phones. The tokens are made up (an APNs token is 32 bytes in hex; an FCM token is longer, with a
# colon), fixed so a second seed refreshes the same devices rather than adding some.
PHONE_OWNER = "demo-alice"
DEMO_SMS_NUMBER = "+819012345678"  # the number Japanese examples use (090-1234-5678)
DEMO_SLACK_MEMBER = "U0HATOALICE"  # alice's Slack member id: the bot's DM to her (the stand-in, or your workspace)
DEMO_PHONES = [
    {
        "platform": "ios",
        "token": hashlib.sha256(b"hato demo: alice's iPhone").hexdigest(),
        "app_version": "1.0.0",
        "locale": "en",
        "timezone": "Asia/Tokyo",
    },
    {
        "platform": "android",
        "token": "demo-alice-android:APA91b" + hashlib.sha256(b"hato demo: alice's Android phone").hexdigest(),
        "app_version": "1.0.0",
        "locale": "en",
        "timezone": "Asia/Tokyo",
    },
]
# The notification sent to alice's phones through the pipeline, once (its dedupe key); push is on for this type.
PHONE_PUSH_TYPE, PHONE_PUSH_NUMBER = "reservation_approved", 300 + NOTIFICATIONS_PER_MEMBER + 1


# The demo announcements in Japanese (issue 33), by their English title.
DEMO_ANNOUNCEMENTS_JA = {
    "Welcome to Hato": (
        "Hato へようこそ",
        "通知とお知らせは **ひとつの受信箱** に届きます。\n\n"
        "- 既読にしたりアーカイブしたりできます\n- 受け取る方法は *設定* で選べます",
    ),
    "Maintenance finished": ("メンテナンスが終わりました", "先週のメンテナンスは終了しました。"),
    "New rooms next month": ("来月から新しい会議室", "来月から新しい会議室を 2 つ予約できます。"),
}
