"""run_bulk_operation(op_id): the job behind "replay / discard everything matching" on the DLQ page."""

from __future__ import annotations

from flask import current_app

from app.delivery import dlq


def run_bulk_operation(operation_id: int) -> dict:
    """Replay or discard the operation's matching rows in committed batches (app/delivery/dlq.py)."""
    return dlq.run_bulk_operation(int(operation_id), int(current_app.config["BULK_BATCH_SIZE"]))
