"""E-mail frequency on the preference screen: the choices, defaults not stored, mandatory always immediate."""

from __future__ import annotations

from datetime import time

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.models import User
from tests.factories import NotificationTypeFactory, UserFactory
from tests.preferences.conftest import stored
from tests.support.html import attrs, one, texts


@pytest.fixture
def types():
    return [
        NotificationTypeFactory(type="like", label="Likes", default_email=True, email_frequency="daily"),
        NotificationTypeFactory(type="comment", label="Comments", default_email=False),
        NotificationTypeFactory(type="security", label="Security", default_email=True, mandatory=True),
    ]


@pytest.fixture
def member(login_as, types):
    return login_as(UserFactory(timezone="America/New_York"))


def frequencies(user_id: int) -> list[tuple]:
    rows = db.session.execute(
        sa.text("SELECT type, frequency FROM digest_preferences WHERE user_id = :u ORDER BY type"), {"u": user_id}
    )
    return [tuple(r) for r in rows]


def save(client, headers, **form):
    return client.post("/preferences/email-frequency", data={"digest_time": "09:00", **form}, headers=headers)


def test_page_shows_each_types_choice_with_the_operators_default(client, member):
    html = client.get("/preferences").get_data(as_text=True)
    assert attrs(html, "#frequency-like option[selected]", "value") == ["daily"]  # the type's default
    assert texts(html, "#frequency-like option[selected]") == ["Daily digest (default)"]
    assert attrs(html, "#frequency-comment option[selected]", "value") == ["off"]
    assert one(html, "#frequency-security").name == "p"  # no control: mandatory types are always immediate
    assert "Immediately" in texts(html, "#frequency-security")[0]
    assert one(html, "#digest_time")["value"] == "09:00"


def test_choices_store_only_deviations_and_the_default_deletes_them(client, member, csrf):
    response = save(client, csrf(), **{"frequency-like": "hourly", "frequency-comment": "daily"})
    assert response.status_code == 303 and response.headers["Location"].endswith("#email-frequency")
    assert frequencies(member.id) == [("comment", "daily"), ("like", "hourly")]
    assert stored(member.id) == [("comment", "email", True)]  # comment e-mail was off by default: now on

    save(client, csrf(), **{"frequency-like": "daily", "frequency-comment": "off"})

    assert frequencies(member.id) == [("comment", "daily")]  # kept for when e-mail is turned back on
    assert stored(member.id) == []
    html = client.get("/preferences").get_data(as_text=True)
    assert attrs(html, "#frequency-like option[selected]", "value") == ["daily"]


def test_off_turns_email_off_like_the_switch(client, member, csrf):
    save(client, csrf(), **{"frequency-like": "off"})
    assert stored(member.id) == [("like", "email", False)]
    assert frequencies(member.id) == []


def test_mandatory_types_cannot_leave_immediate(client, member, csrf):
    response = save(client, csrf(), **{"frequency-security": "daily", "frequency-like": "hourly"})
    assert response.status_code == 422
    assert frequencies(member.id) == [] and stored(member.id) == []  # nothing of the form was saved


@pytest.mark.parametrize("form", [{"frequency-like": "weekly"}, {"digest_time": "25:00"}, {"digest_time": ""}])
def test_bad_input_gets_422_and_changes_nothing(client, member, csrf, form):
    response = client.post("/preferences/email-frequency", data={"digest_time": "09:00", **form}, headers=csrf())
    assert response.status_code == 422 and b"Traceback" not in response.data
    assert frequencies(member.id) == []


def test_digest_time_is_stored_unless_it_is_the_default(client, member, csrf):
    save(client, csrf(), digest_time="07:30")
    db.session.expire_all()
    assert db.session.get(User, member.id).digest_time == time(7, 30)
    save(client, csrf(), digest_time="09:00")
    db.session.expire_all()
    assert db.session.get(User, member.id).digest_time is None


def test_without_csrf_or_sign_in_nothing_changes(client, member, app):
    assert client.post("/preferences/email-frequency", data={"frequency-like": "hourly"}).status_code == 400
    assert frequencies(member.id) == []
    anonymous = app.test_client()
    assert anonymous.post("/preferences/email-frequency", data={"frequency-like": "hourly"}).status_code in (302, 400)
