"""The operator console: one module per screen on one blueprint (app/console/blueprint.py).

overview (the landing page), announcements, notification_types, message_templates, suppressions, channels,
api_keys, users, audit_log, campaigns, deliveries (the delivery log, with a notification's workflow run), dlq,
dashboard, webhooks, workflows (a type's delivery steps), workflow_trial (a workflow's test run),
workflow_history (its versions, diffs, rollback), tenants (the product's customers: branding, default preferences),
topics (the fanouts of notifications sent to a topic), analytics (delivery figures from the rollups).
Pages parse the request, call one domain function, commit once and render; the reads and writes live in the domain
packages (app.announcements, app.notification_types, app.message_templates, app.delivery, …).
"""

from app.console import (  # noqa: F401 - importing a page registers its routes on bp
    analytics,
    announcements,
    api_keys,
    audit_log,
    campaigns,
    channels,
    dashboard,
    deliveries,
    dlq,
    message_templates,
    notification_types,
    overview,
    suppressions,
    tenants,
    topics,
    users,
    webhooks,
    workflow_history,
    workflow_trial,
    workflows,
)
from app.console.blueprint import bp

__all__ = ["bp"]
