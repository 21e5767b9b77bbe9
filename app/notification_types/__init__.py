"""Notification types: what kinds of notification exist, their per-channel defaults, mandatory, priority."""
