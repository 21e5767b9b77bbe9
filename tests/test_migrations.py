"""Migrations: one head, and upgrade → downgrade → upgrade works on an empty database."""

from urllib.parse import urlsplit

import sqlalchemy as sa
from alembic.script import ScriptDirectory
from flask_migrate import downgrade, upgrade

from app import create_app
from app.config import sqlalchemy_url
from app.extensions import db
from tests.conftest import TEST_CONFIG
from tests.support.databases import recreate_database


def test_single_head(app):
    with app.app_context():
        config = app.extensions["migrate"].migrate.get_config()
        assert len(ScriptDirectory.from_config(config).get_heads()) == 1


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(sqlalchemy_url(url))
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(database_url):
    url = urlsplit(database_url)._replace(path="/hato_migrations_test").geturl()
    recreate_database(url)
    scratch = create_app(dict(TEST_CONFIG, SQLALCHEMY_DATABASE_URI=sqlalchemy_url(url)))
    with scratch.app_context():
        upgrade()
        assert _tables(url) == set(db.metadata.tables)
        downgrade(revision="base")
        assert _tables(url) == set()
        upgrade()
        assert _tables(url) == set(db.metadata.tables)
        db.engine.dispose()
