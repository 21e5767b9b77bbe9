"""Action buttons on notifications (issue 33): the buttons shown, the once-only click, its signed links."""
