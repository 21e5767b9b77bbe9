"""The audit log: who changed what and when, with the state before and after (service.py writes, queries.py reads)."""
