"""Access guards: who may see which pages."""

from __future__ import annotations

from functools import wraps

from flask import abort
from flask_login import current_user, login_required


def operator_required(view):
    """Allow operators and admins; everyone else signed in gets 403."""

    @wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not current_user.is_operator:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def admin_required(view):
    """Allow admins only."""

    @wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not current_user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped
