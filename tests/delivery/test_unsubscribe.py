"""One-click unsubscribe: GET changes nothing, POST (no cookie, no CSRF) turns e-mail off."""

from __future__ import annotations

import sqlalchemy as sa

from app.delivery.unsubscribe import make_token, read_token
from app.extensions import db
from app.models import NotificationPreference
from tests.factories import NotificationTypeFactory, UserFactory
from tests.support.html import one


def email_pref(user_id, type_):
    return db.session.execute(
        sa.select(NotificationPreference.enabled).where(
            NotificationPreference.user_id == user_id,
            NotificationPreference.type == type_,
            NotificationPreference.channel == "email",
        )
    ).scalar_one_or_none()


def test_token_round_trip_and_tampering(app):
    with app.app_context():
        token = make_token(5, "comment")
        assert read_token(token).user_id == 5 and read_token(token).type == "comment"
        assert read_token(token[:-2] + ("AA" if not token.endswith("AA") else "BB")) is None
        assert read_token("garbage") is None


def test_get_shows_confirmation_and_changes_nothing(app, client, email_type):
    user = UserFactory()
    token = make_token(user.id, email_type.type)

    response = client.get(f"/unsubscribe/{token}")

    assert response.status_code == 200
    page = response.get_data(as_text=True)
    assert "Unsubscribe from Comments e-mails?" in page
    assert one(page, f'form[action="/unsubscribe/{token}"]')["method"] == "post"
    assert email_pref(user.id, email_type.type) is None


def test_one_click_post_without_cookie_or_csrf_turns_email_off(app, email_type):
    user = UserFactory()
    token = make_token(user.id, email_type.type)
    mail_client = app.test_client(use_cookies=False)

    response = mail_client.post(f"/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"})

    assert response.status_code == 200
    assert "You are unsubscribed" in response.get_data(as_text=True)
    assert email_pref(user.id, email_type.type) is False
    again = mail_client.post(f"/unsubscribe/{token}", data={"List-Unsubscribe": "One-Click"})
    assert again.status_code == 200 and email_pref(user.id, email_type.type) is False
    assert "E-mail is already off" in app.test_client().get(f"/unsubscribe/{token}").get_data(as_text=True)


def test_post_overrides_an_earlier_opt_in(app, email_type):
    from tests.factories import PreferenceFactory

    user = UserFactory()
    PreferenceFactory(user_id=user.id, type=email_type.type, channel="email", enabled=True)

    app.test_client().post(f"/unsubscribe/{make_token(user.id, email_type.type)}")

    assert email_pref(user.id, email_type.type) is False


def test_mandatory_type_is_never_turned_off(app):
    NotificationTypeFactory(type="security", label="Security alerts", default_email=True, mandatory=True)
    user = UserFactory()
    token = make_token(user.id, "security")

    get_page = app.test_client().get(f"/unsubscribe/{token}").get_data(as_text=True)
    response = app.test_client().post(f"/unsubscribe/{token}")

    assert "can't be turned off" in get_page and "<form" not in get_page
    assert response.status_code == 200
    assert "Security alerts e-mails can't be turned off" in response.get_data(as_text=True)
    assert email_pref(user.id, "security") is None


def test_bad_token_is_a_clear_404_and_changes_nothing(app, email_type):
    user = UserFactory()
    forged = make_token(user.id, email_type.type)[:-4] + "AAAA"

    for method in ("get", "post"):
        response = getattr(app.test_client(), method)(f"/unsubscribe/{forged}")
        assert response.status_code == 404
        assert "This link does not work" in response.get_data(as_text=True)
    assert db.session.scalar(sa.select(sa.func.count()).select_from(NotificationPreference)) == 0


def test_token_for_a_deleted_user_or_type_is_invalid(app, email_type):
    token = make_token(987654, email_type.type)
    assert app.test_client().post(f"/unsubscribe/{token}").status_code == 404
    assert app.test_client().get(f"/unsubscribe/{make_token(UserFactory().id, 'nope')}").status_code == 404
