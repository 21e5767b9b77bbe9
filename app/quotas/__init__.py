"""Quotas at the API's door (seed 004): per API key (producer) and per tenant, a rate and a daily quota."""
