"""factory_boy factories for the core tables (flushed into the test's rolled-back session)."""

from __future__ import annotations

import factory
from factory.alchemy import SQLAlchemyModelFactory

from app.extensions import db
from app.models import Announcement, Notification, NotificationDelivery, NotificationPreference, NotificationType, User
from app.workflows import service as workflows


class _Base(SQLAlchemyModelFactory):
    class Meta:
        abstract = True
        sqlalchemy_session_factory = lambda: db.session  # noqa: E731 - resolved per test
        sqlalchemy_session_persistence = "flush"


class UserFactory(_Base):
    class Meta:
        model = User

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    display_name = factory.Sequence(lambda n: f"User {n}")
    external_id = factory.Sequence(lambda n: f"ext-{n}")
    role = "member"
    password_hash = factory.LazyFunction(lambda: PASSWORD_HASH)


class NotificationTypeFactory(_Base):
    class Meta:
        model = NotificationType
        sqlalchemy_get_or_create = ("type",)

    type = factory.Sequence(lambda n: f"type_{n}")
    label = factory.LazyAttribute(lambda o: o.type.replace("_", " ").title())
    default_in_app = True
    default_email = False
    default_push = False
    mandatory = False
    priority = "default"

    @factory.post_generation
    def workflow(obj, create, extracted, **kwargs):
        """Its published workflow: the steps its timing columns mean, as a type saved by the console gets."""
        if create:
            workflows.publish_columns(None, obj.type)


class NotificationFactory(_Base):
    class Meta:
        model = Notification

    user_id = factory.LazyFunction(lambda: UserFactory().id)
    type = factory.LazyFunction(lambda: NotificationTypeFactory(type="comment").type)
    title = factory.Sequence(lambda n: f"Notification {n}")
    body = "Body"
    link_path = "/inbox"
    dedupe_key = factory.Sequence(lambda n: f"test:{n}")


class AnnouncementFactory(_Base):
    class Meta:
        model = Announcement

    title = factory.Sequence(lambda n: f"Announcement {n}")
    body = "Body"
    published_at = factory.LazyFunction(
        lambda: db.session.execute(db.text("SELECT now() - interval '1 hour'")).scalar()
    )
    expires_at = None


class PreferenceFactory(_Base):
    class Meta:
        model = NotificationPreference


class DeliveryFactory(_Base):
    class Meta:
        model = NotificationDelivery

    channel = "email"
    # The notification's recipient, as every INSERT into the ledger sets it (0016).
    user_id = factory.LazyAttribute(
        lambda o: db.session.execute(
            db.text("SELECT user_id FROM notifications WHERE id = :id"), {"id": o.notification_id}
        ).scalar_one()
    )


TEST_PASSWORD = "correct horse battery"
# Hashing scrypt per user would make factories slow; every factory user shares this one hash.
from werkzeug.security import generate_password_hash  # noqa: E402

PASSWORD_HASH = generate_password_hash(TEST_PASSWORD, method="scrypt")
