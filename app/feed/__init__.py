"""The headless feed API for embedded pages (/v1/feed), authenticated by signed user tokens."""
