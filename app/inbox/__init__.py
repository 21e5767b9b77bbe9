"""The end user's inbox: the seed's badge and list statements, mark read / archive, and the pages."""
