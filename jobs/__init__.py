"""RQ job functions: ids in, idempotent, each commits once. The worker runs them in an app context."""
