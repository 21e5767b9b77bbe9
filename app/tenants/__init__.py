"""Tenants (issue 32): the product's customer organisations, their members, branding and default preferences."""
