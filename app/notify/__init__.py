"""The notify pipeline: personal notifications, preference-aware deliveries, in one statement.

The API's ingest and (later) campaign fanout both call `service.notify`; the caller owns the
transaction and does the enqueue/publish after its commit.
"""
