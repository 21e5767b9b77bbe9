"""The send loop's ledger connection: asynchronous commits by default, synchronous ones when asked (failover)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from app.delivery import service


@pytest.mark.committed
@pytest.mark.parametrize(("synchronous", "setting"), [(False, "off"), (True, "on")])
def test_the_ledger_commits_as_configured_and_leaves_the_pool_as_it_was(app, synchronous, setting):
    app.config["DELIVERY_LEDGER_SYNCHRONOUS"] = synchronous
    try:
        with service.send_ledger() as conn:
            assert conn.execute(sa.text("SHOW synchronous_commit")).scalar_one() == setting
        with service.db.engine.connect() as conn:  # the pooled connection is reset for its next user
            assert conn.execute(sa.text("SHOW synchronous_commit")).scalar_one() == "on"
    finally:
        app.config["DELIVERY_LEDGER_SYNCHRONOUS"] = False
