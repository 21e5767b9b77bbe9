"""Action reads: the buttons a member sees (label in their locale, the product's answered state) and one action."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from app.extensions import db
from app.locales import locale_chain, pick_for_chain

# How long a clicked, unanswered button keeps asking for the product's answer (an open inbox polls meanwhile).
WAIT_MINUTES = 10

# Columns for a notifications row list (app/inbox/queries.py ROW_COLUMNS): the buttons, their states and the
# member's locale, looked up only for a row that has buttons (a primary-key probe each), so others cost nothing.
ROW_COLUMNS = f"""actions,
  CASE WHEN actions IS NOT NULL THEN (
    SELECT jsonb_object_agg(c.name, jsonb_build_array(c.state, c.clicked_at IS NOT NULL,
                                                      c.clicked_at > now() - make_interval(mins => {WAIT_MINUTES})))
    FROM notification_action_clicks c
    WHERE c.user_id = notifications.user_id AND c.notification_id = notifications.id) END AS action_states,
  CASE WHEN actions IS NOT NULL THEN (SELECT u.locale FROM users u WHERE u.id = notifications.user_id) END
    AS member_locale"""

# Any of the member's rows, shown or not: an e-mail's button works for a member who turned in-app off.
TARGET_SQL = sa.text(
    """
SELECT n.id, n.user_id, n.type, n.title, n.dedupe_key, n.data, n.actions, n.tenant_id, n.in_app, u.locale
FROM notifications n JOIN users u ON u.id = n.user_id
WHERE n.id = :id AND n.user_id = :user_id
"""
)

STATE_SQL = sa.text(
    "SELECT state, clicked_at FROM notification_action_clicks "
    "WHERE user_id = :user_id AND notification_id = :id AND name = :name"
)


@dataclass(frozen=True)
class Button:
    """One button as a member sees it: a link (url) or a named action (name), with its state once answered."""

    label: str
    url: str | None = None
    name: str | None = None
    state: str | None = None  # the product's answer, such as "Approved"
    clicked: bool = False  # sent, the product has not answered yet
    waiting: bool = False  # clicked in the last WAIT_MINUTES without an answer: the inbox asks again

    @property
    def done(self) -> bool:
        """Clicked or answered: the button is closed."""
        return self.clicked or self.state is not None


def label_for(button: dict, locale: str | None, default: str) -> str:
    """The button's label along the member's locale chain (their locale, its language, the default), else `label`."""
    return pick_for_chain(button.get("labels") or {}, locale_chain(locale, default), button["label"])


def buttons(actions: list | None, states: dict | None, locale: str | None, default: str) -> list[Button]:
    """The stored buttons as the member sees them."""
    states = states or {}
    shown = []
    for button in actions or ():
        label = label_for(button, locale, default)
        name = button.get("action")
        if name is None:
            shown.append(Button(label=label, url=button.get("url")))
        else:
            state, clicked, recent = (list(states.get(name, ())) + [None, False, False])[:3]
            shown.append(Button(label=label, name=name, state=state, clicked=bool(clicked),
                                waiting=bool(recent) and state is None))  # fmt: skip
    return shown


def row_buttons(row, default: str) -> list[Button]:
    """The buttons of a list row carrying ROW_COLUMNS."""
    return buttons(row["actions"], row["action_states"], row["member_locale"], default)


def find(actions: list | None, name: str) -> dict | None:
    """The stored named action `name` of a row's buttons, or None."""
    return next((b for b in actions or () if b.get("action") == name), None)


def target(user_id: int, notification_id: int):
    """The member's notification (shown or not) with their locale, or None."""
    return db.session.execute(TARGET_SQL, {"id": notification_id, "user_id": user_id}).mappings().first()


def state(user_id: int, notification_id: int, name: str):
    """The click row of one action (state, clicked_at), or None."""
    return db.session.execute(STATE_SQL, {"user_id": user_id, "id": notification_id, "name": name}).first()
