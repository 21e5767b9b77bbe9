"""What an operator may set as a quota: the bounds every subject's limits are checked against (as the tables')."""

from __future__ import annotations

from flask_babel import gettext

from app.refusal import Refused

MAX_RATE = 1_000_000  # requests per second
MAX_BURST = 1_000_000
MAX_DAILY = 1_000_000_000_000  # notifications per UTC day


def checked(rate: float | None, burst: int | None, daily: int | None) -> tuple[float | None, int | None, int | None]:
    """Return the limits as stored (None: no limit), or refuse with what is wrong."""
    if rate is not None and not 0 < rate <= MAX_RATE:
        raise Refused(gettext("The rate must be more than 0 and at most %(max)s requests a second.", max=MAX_RATE))
    if burst is not None and not 1 <= burst <= MAX_BURST:
        raise Refused(gettext("The burst must be between 1 and %(max)s requests.", max=MAX_BURST))
    if burst is not None and rate is None:
        raise Refused(gettext("A burst needs a rate: set the rate too, or leave both empty."))
    if daily is not None and not 0 <= daily <= MAX_DAILY:
        raise Refused(gettext("The daily quota must be between 0 and %(max)s notifications.", max=MAX_DAILY))
    return rate, burst, daily
