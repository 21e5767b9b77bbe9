"""WSGI entry point: `gunicorn wsgi:app` and `flask --app wsgi …` (web app, worker and sweeper alike).

Before anything is served the settings are checked (app/config.py check): a missing or published
SECRET_KEY, a value out of range or a combination that cannot work stops the process with exit
code 3, which also makes gunicorn stop instead of restarting the worker forever. So do compiled
catalogs that are missing or older than their .po (app/i18n.py catalog_problems; dev mode compiles
them instead): without them every user would be answered in English, and nobody told.
"""

import sys

from app import create_app
from app.config import check, refuse_to_start
from app.i18n import catalog_problems
from app.providers.registry import registered_names

app = create_app()

_problems = check(app.config, registered_names()) + catalog_problems(app.config["DEV_MODE"])
if _problems:
    refuse_to_start(_problems, sys.stderr.write)
    sys.exit(3)
