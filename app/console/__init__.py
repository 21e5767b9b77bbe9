"""The operator console: announcements, types, templates, suppressions, API keys, users, audit log."""
