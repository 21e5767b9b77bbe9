"""Run inside a copy of the tree that has one more channel module; print what every surface says of it.

python -m tests.delivery.registry_probe.probe (DATABASE_URL: an empty scratch database; DUMMY_SINK: a file).
"""

from __future__ import annotations

import json
import os

import sqlalchemy as sa


def main() -> None:
    from flask_migrate import upgrade

    from app import create_app
    from app.api_keys.scopes import SCOPES
    from app.api_keys.service import create_api_key
    from app.auth import sessions
    from app.delivery.channels import channel_names
    from app.extensions import db
    from app.models import NotificationType, User
    from app.unitofwork import commit
    from jobs.delivery import deliver_batch
    from tests.conftest import TEST_CONFIG

    app = create_app(dict(TEST_CONFIG))
    found: dict = {}
    with app.app_context():
        upgrade()  # the channel constraints follow the registry (migrations/env.py)
        found["registry"] = list(channel_names())
        found["constraints"] = {
            name: db.session.execute(
                sa.text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = :n"), {"n": name}
            ).scalar()
            for name in ("notification_deliveries_channel", "notification_preferences_channel",
                         "message_templates_channel")
        }  # fmt: skip
        db.session.add(NotificationType(type="ping", label="Ping", default_channels=["dummy"]))
        member = User(email="m@example.com", display_name="M", external_id="m-1", role="member")
        operator = User(email="o@example.com", display_name="O", external_id="o-1", role="operator")
        db.session.add_all([member, operator])
        key = create_api_key(None, "probe", SCOPES)
        commit()
        client = app.test_client()
        headers = {"Authorization": f"Bearer {key}"}
        spec = client.get("/v1/openapi.json", headers=headers).get_json()
        found["openapi"] = spec["components"]["schemas"]["NotificationIn"]["properties"]["channels"]["items"]["enum"]
        answer = client.post(
            "/v1/notifications",
            headers=headers,
            json={
                "type": "ping",
                "recipient": "m-1",
                "title": "Hello",
                "body": "from the dummy",
                "channels": ["dummy"],
            },
        )
        found["post"] = answer.status_code
        ids = list(db.session.execute(sa.text("SELECT id FROM notification_deliveries WHERE channel = 'dummy'"))
                   .scalars())  # fmt: skip
        found["delivered"] = deliver_batch("dummy", ids)
        with open(os.environ["DUMMY_SINK"], encoding="utf-8") as sink:
            found["sink"] = [json.loads(line) for line in sink]
        console = ["/console/templates", "/console/deliveries", "/console/channels", "/console/types/new"]
        people = [
            (member.id, member.session_version, ["/preferences"]),
            (operator.id, operator.session_version, console),
        ]
    # Outside the app context: each request then has its own (Flask-Login keeps the signed-in user in g).
    pages = {}
    for user_id, version, paths in people:
        browser = app.test_client()  # a browser of their own
        with browser.session_transaction() as sess:
            sess["_user_id"], sess["_fresh"] = str(user_id), True
            sess.update(sessions.stamp(user_id, version))
        for path in paths:
            response = browser.get(path)
            pages[path] = (response.status_code, "Dummy" in response.get_data(as_text=True))
    found["pages"] = pages
    print(json.dumps(found, default=str))


if __name__ == "__main__":
    main()
