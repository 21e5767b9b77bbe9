"""A channel module and a probe for tests/delivery/test_channel_registry.py (copied into a scratch tree)."""
