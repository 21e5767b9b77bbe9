"""Hato: a self-hosted notification service (inbox, console, API, delivery workers)."""

from __future__ import annotations

from flask import Flask

from app.config import Config


def create_app(test_config: dict | None = None) -> Flask:
    """Create the app: config, then extensions, then blueprints and CLI. No I/O happens here."""
    app = Flask(__name__, template_folder="../templates", static_folder="../static")
    app.config.from_object(Config())
    if test_config:
        app.config.update(test_config)

    from app import extensions

    extensions.init_app(app)

    from app import cli, errors, security, templating
    from app.api.views import bp as api_bp
    from app.auth.views import bp as auth_bp
    from app.console.views import bp as console_bp
    from app.delivery.views import bp as delivery_bp
    from app.health import bp as health_bp
    from app.inbox.views import bp as inbox_bp
    from app.metrics import bp as metrics_bp
    from app.preferences.views import bp as preferences_bp
    from app.push.views import bp as push_bp
    from app.realtime.views import bp as realtime_bp

    security.init_app(app)
    templating.init_app(app)
    errors.init_app(app)
    cli.init_app(app)
    for blueprint in (auth_bp, inbox_bp, health_bp, realtime_bp):
        app.register_blueprint(blueprint)
    app.register_blueprint(delivery_bp)
    app.register_blueprint(metrics_bp)
    app.register_blueprint(preferences_bp)
    app.register_blueprint(api_bp)
    app.register_blueprint(console_bp)
    app.register_blueprint(push_bp)
    return app
