"""Delivery analytics (issue 33): rollups of the ledger per hour and day, folded in sets by the sweeper."""
