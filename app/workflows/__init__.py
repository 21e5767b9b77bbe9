"""Workflows (issue 31): each notification type's delivery plan as versioned steps."""
