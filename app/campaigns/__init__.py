"""Campaigns: one send to many users, fanned out by a set-based background job (jobs/fanout.py)."""
