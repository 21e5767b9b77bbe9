"""Hato: a self-hosted notification service (inbox, console, API, delivery workers)."""

from __future__ import annotations

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from app.config import Config


def create_app(test_config: dict | None = None) -> Flask:
    """Create the app: config, then extensions, then blueprints and CLI. No I/O happens here.

    This is the composition root: the only module that sees every layer (see .importlinter).
    """
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_object(Config())
    if test_config:
        app.config.update(test_config)
    hops = app.config["TRUSTED_PROXY_HOPS"]
    if hops:  # behind that many reverse proxies: the client's address and scheme are what the nearest ones saw
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)  # type: ignore[method-assign]

    from app import cli, driversql, extensions, replicas, telemetry, unitofwork
    from app.actions.views import bp as actions_bp
    from app.api.views import bp as api_bp
    from app.auth.views import bp as auth_bp
    from app.console import bp as console_bp
    from app.delivery.views import bp as delivery_bp
    from app.feed.views import bp as feed_bp
    from app.hooks.views import bp as hooks_bp
    from app.inbox.views import bp as inbox_bp
    from app.ops.health import bp as health_bp
    from app.ops.metrics import bp as metrics_bp
    from app.preferences.views import bp as preferences_bp
    from app.push.views import bp as push_bp
    from app.realtime.views import bp as realtime_bp
    from app.realtime.views import feed_bp as feed_socket_bp
    from app.web import errors, headers, i18n, sessions, templating

    telemetry.setup(app)  # first: the request span then covers every hook below (nothing at all when off)
    extensions.init_app(app)
    unitofwork.init_app(app)
    driversql.init_app(app)
    replicas.init_app(app)  # read replicas, if DATABASE_REPLICA_URLS names any
    headers.init_app(app)
    sessions.init_app(app, sessionless=(api_bp.name,))  # the API authenticates by key, never by cookie
    i18n.init_app(app)
    templating.init_app(app)
    errors.init_app(app)
    cli.init_app(app)
    blueprints = (auth_bp, inbox_bp, health_bp, realtime_bp, delivery_bp, metrics_bp, preferences_bp, api_bp,
                  console_bp, push_bp, hooks_bp, feed_bp, feed_socket_bp, actions_bp)  # fmt: skip
    for blueprint in blueprints:
        app.register_blueprint(blueprint)
    return app
