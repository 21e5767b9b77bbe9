"""Message templates: the operator's wording per (type, channel, locale), its versions, and the preview."""
