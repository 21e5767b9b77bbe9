"""The harness itself: each test's writes are rolled back, even when the code under test commits."""

import sqlalchemy as sa

from app.extensions import db
from app.models import User

MARKER = "rollback-proof@example.com"


def test_first_writes_and_commits():
    db.session.add(User(email=MARKER))
    db.session.commit()
    assert db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email == MARKER)) == 1


def test_second_sees_nothing_of_the_first():
    assert db.session.scalar(sa.select(sa.func.count()).select_from(User).where(User.email == MARKER)) == 0


def test_factory_create_app_in_testing_mode(app):
    assert app.testing
