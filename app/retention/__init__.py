"""Retention (issue 18): old notifications, ledger rows and expired announcements' reads deleted in small batches."""
