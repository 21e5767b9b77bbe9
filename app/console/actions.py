"""One console action: call one service change; refused, say why and change nothing; else commit, say so, redirect.

Every POST that changes something ends the same way, so it is written once here. A refusal
(app/refusal.py) is raised before the service's first write: nothing is committed, and the message goes
to the form being re-rendered (`form=`) or is flashed as an error on the page redirected to. A change
that went through is committed (its jobs and broadcasts follow the commit), a success message is flashed,
and the browser is redirected (POST → redirect → GET, so a reload never repeats the change).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from flask import flash, redirect
from flask_babel import gettext
from flask_wtf import FlaskForm
from werkzeug.wrappers import Response

from app.console.forms import QuotaForm
from app.refusal import Refused
from app.unitofwork import commit

T = TypeVar("T")


def run_action(
    change: Callable[[], T],
    *,
    success: object | Callable[[T], object],
    redirect_to: str | Callable[[T], str],
    refused_to: str | None = None,
    form: FlaskForm | None = None,
) -> Response | None:
    """Run change(); return the redirect that follows, or None when refused with a form (re-render it).

    success and redirect_to may be functions of change()'s result. A refusal without a form is flashed
    and redirected to refused_to, or to redirect_to when that is a plain URL.
    """
    try:
        result = change()
    except Refused as exc:
        if form is not None:
            form.form_errors.append(str(exc))
            return None
        flash(str(exc), "error")
        if refused_to is None and callable(redirect_to):
            raise TypeError("run_action: a redirect_to that needs the result needs a refused_to") from exc
        return redirect(refused_to if refused_to is not None else redirect_to)
    commit()
    flash(str(_given(success, result)), "success")
    return redirect(str(_given(redirect_to, result)))


def _given(value: object, result: object) -> object:
    return value(result) if callable(value) else value


def set_quota(change: Callable[..., bool], changed: str, unchanged: str, back: str) -> Response:
    """Set a subject's quotas (an API key's, a tenant's) from the posted QuotaForm with change(rate, burst, daily)."""
    form = QuotaForm()
    if not form.validate_on_submit():
        errors = [str(error) for field in (form.rate, form.burst, form.daily) for error in field.errors]
        flash(" ".join(errors) or gettext("Check the limits."), "error")
        return redirect(back)
    return run_action(
        lambda: change(form.rate.data, form.burst.data, form.daily.data),
        success=lambda done: changed if done else unchanged,
        redirect_to=back,
    )
