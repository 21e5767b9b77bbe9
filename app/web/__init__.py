"""What every page and API answer shares: error pages and problem documents, security headers, template filters."""
