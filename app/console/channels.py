"""Channels: the kill switches (seed 004). Pause a channel, or one provider of it, saying why; resume it."""

from __future__ import annotations

from flask import current_app, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from app.console.actions import run_action
from app.console.blueprint import bp
from app.delivery import switches
from app.delivery.channels import all_channels
from app.providers.status import provider_states


@bp.get("/channels")
def channels():
    """Each channel that sends, its providers in failover order, what is paused and what waits for it."""
    sending = [c for c in all_channels() if c.delivers]
    return render_template(
        "console/channels.html",
        channels=sending,
        providers=provider_states(current_app.config, [c.name for c in sending]),
        paused=switches.read(),
        waiting=switches.waiting(),
    )


def _where(channel: str, provider: str) -> str:
    return f"{channel}/{provider}" if provider else channel


@bp.post("/channels/pause")
def pause_channel():
    """Pause a channel or one provider of it (with a reason); audited."""
    channel, provider = request.form.get("channel", ""), request.form.get("provider", "")
    return run_action(
        lambda: switches.pause(current_user, channel, provider, request.form.get("reason", ""), current_app.config),
        success=gettext("%(what)s paused: its deliveries wait until it is resumed.", what=_where(channel, provider)),
        redirect_to=url_for("console.channels"),
    )


@bp.post("/channels/resume")
def resume_channel():
    """Resume a channel or one provider of it; the waiting rows go at the sweeper's next pass. Audited."""
    channel, provider = request.form.get("channel", ""), request.form.get("provider", "")
    return run_action(
        lambda: switches.resume(current_user, channel, provider, current_app.config),
        success=lambda done: (
            gettext("%(what)s resumed: the sweeper's next pass sends what waited.", what=_where(channel, provider))
            if done
            else gettext("%(what)s was not paused.", what=_where(channel, provider))
        ),
        redirect_to=url_for("console.channels"),
    )
