"""The operator console: announcements, types, templates, users, audit log, campaigns, delivery log, DLQ, dashboard."""
