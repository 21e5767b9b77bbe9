"""What the console's workflow editor posts: every step's fields under indexed names, and the button pressed."""

from __future__ import annotations


def editor_form(steps: list[dict], op: str = "", **extra) -> dict:
    """steps as the editor's fields (kind, channel, read, offline, condition, wait_for_tab, delay_by, delay_value,
    window, count, frequency), op the button (save, publish, add, remove-N, up-N, down-N, discard)."""
    data = {"op": op, **extra}
    for i, step in enumerate(steps):
        data.update({f"steps-{i}-{name}": value for name, value in step.items()})
    return data
