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
    # A scratch database named after the test database, so parallel checkouts never share one.
    parts = urlsplit(database_url)
    url = parts._replace(path=parts.path + "_migrations").geturl()
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


def _keys(inspector: sa.Inspector, table: str) -> tuple:
    fks = {
        (tuple(fk["constrained_columns"]), fk["referred_table"], tuple(fk["referred_columns"]))
        for fk in inspector.get_foreign_keys(table)
    }
    uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)}
    return tuple(inspector.get_pk_constraint(table)["constrained_columns"]), uniques, fks


def _model_keys(table: sa.Table) -> tuple:
    fks = {
        (tuple(c.name for c in fk.columns), fk.referred_table.name, tuple(e.column.name for e in fk.elements))
        for fk in table.foreign_key_constraints
    }
    uniques = {tuple(c.name for c in u.columns) for u in table.constraints if isinstance(u, sa.UniqueConstraint)}
    uniques |= {(c.name,) for c in table.columns if c.unique}
    return tuple(c.name for c in table.primary_key.columns), uniques, fks


def test_models_and_migrations_agree_on_keys(app):
    """Primary keys, unique constraints and foreign keys of the migrated database are the models' own."""
    with app.app_context():
        inspector = sa.inspect(db.engine)
        for name, table in db.metadata.tables.items():
            assert _keys(inspector, name) == _model_keys(table), name
