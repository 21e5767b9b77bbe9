"""Preferences: type × channel deviations from the defaults, mandatory types locked, quiet hours."""
