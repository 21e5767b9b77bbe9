"""Delivery: claim ledger rows, re-check, render, send through a provider, record, retry, DLQ."""
