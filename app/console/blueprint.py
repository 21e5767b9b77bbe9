"""The console's blueprint and its role gate: every /console URL needs an operator; admin pages check again.

Each screen is a module of its own in this package; app/console/__init__.py imports them, which
registers their routes on this one blueprint. A page imports this module, never another page.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from flask import Blueprint, abort
from flask_login import current_user

from app.console.labels import console_labels
from app.extensions import login
from app.timezones import user_zone

bp = Blueprint("console", __name__, url_prefix="/console")
# Globals, not a context processor: the macros that console templates import see them too.
bp.record_once(lambda state: state.app.jinja_env.globals.update(console_labels()))


@bp.before_request
def require_operator():
    """Anonymous visitors go to sign-in; members get 403; admin-only pages check again."""
    if not current_user.is_authenticated:
        return login.unauthorized()
    if not current_user.is_operator:
        abort(403)
    return None


def operator_zone() -> ZoneInfo:
    """The signed-in operator's time zone (forms and pages speak it), UTC when unknown."""
    return user_zone(current_user)
