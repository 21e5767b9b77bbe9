"""Announcements: one row per broadcast, shown in every inbox while it is live; read marks only for readers.

queries.py reads (what is live, the console's sections), service.py writes (create, edit, publish,
expire, delete), live.py moves open badges when a scheduled one goes live or expires, markdown.py
renders bodies as sanitised HTML.
"""
