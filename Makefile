# Hato — the README's commands. `make run` starts everything; `make test` runs the whole suite.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install run test soak bench lint clean i18n catalogs

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when requirements.txt is newer than the stamp.
$(STAMP): requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

run: install
	$(PY) -m app.devstack run

# The suite runs only on code that passes `make lint` (CI therefore fails on a finding too).
test: lint
	$(PY) -m app.devstack test -- $(PYTEST_ARGS)

# The soak (tests/soak, marker `soak`, left out of `make test`): 4 web, 2 workers, 2 sweepers, every channel's
# stand-in, kill -9 every SOAK_KILL_EVERY (30) seconds, a PostgreSQL failover at 1/3 and a Redis Cluster master
# killed at 2/3 of SOAK_SECONDS (300); prints the summary, latency per 5 minutes and the witnesses' memory.
soak: lint
	$(PY) -m app.devstack soak -- $(PYTEST_ARGS)

bench: install
	$(PY) -m app.devstack bench

# Extracts every translatable string, updates translations/*/LC_MESSAGES/messages.po, compiles them.
i18n: install
	$(PY) -m app.devstack i18n

# Compiles the catalogs only (run, test and bench do this themselves; production runs it after a deploy).
catalogs: install
	$(PY) -m app.devstack catalogs

# ruff: pyflakes, pycodestyle, isort, bugbear, pyupgrade and bandit rules, and the formatter (pyproject.toml);
# import-linter: the layers and no import cycles (.importlinter); mkdocs: the documentation site (docs/, mkdocs.yml)
# built with --strict into site/ (gitignored), so a broken link or anchor fails.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site

# Removes the embedded PostgreSQL/Redis data, the dev secret key and the mail sink's maildir.
clean:
	rm -rf var
