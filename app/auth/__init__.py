"""Signing in: passwords, one-time sign-in links, sessions, and the guards for operator and admin pages."""
