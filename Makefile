# Two commands: `make demo` (set up, load sample packs, serve) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/test
# `make demo PORT=8001`: the demo on another port (beside one already on 8000)
PORT ?= 8000
export DJANGO_SETTINGS_MODULE := benchviewer.settings

.PHONY: demo test install lint test-sqlite test-postgres services

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# The runner client is a package of its own (clients/benchviewer-push); installed here, its
# `benchviewer-push` command is in the venv beside the server.
$(VENV)/.installed: pyproject.toml clients/benchviewer-push/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q -e clients/benchviewer-push
	# ATIF to OTLP spans, a test producer: its code runs on 3.11 though its metadata asks for 3.12
	$(BIN)/pip install -q --no-deps --ignore-requires-python 'harbor-atif2otel==0.1.1'
	touch $@

install: $(VENV)/.installed

# The demo login is the last line printed before the server starts, so it is easy to find.
demo: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py generate_demo data/demo --replace
	$(BIN)/python manage.py import_packs data/demo $(wildcard ../shared/reference)
	@echo "Benchviewer: http://127.0.0.1:$(PORT)"
	@$(BIN)/python manage.py demo_user
	@$(BIN)/python manage.py runserver 127.0.0.1:$(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

services:
	bash scripts/services.sh

test-sqlite: install
	$(BIN)/pytest tests -q -n 2

# The suite again on PostgreSQL (rows go in by COPY there; the Celery worker and fault tests need
# it): every test but the browser ones and those marked sqlite_only("why") (grep for the reasons).
test-postgres: install services
	DATABASE_URL=$(PG_URL) $(BIN)/pytest tests -q -n 2 -m "not browser and not sqlite_only"

test: lint test-sqlite test-postgres
