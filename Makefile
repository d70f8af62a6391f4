# Two commands: `make demo` (set up, load sample packs, serve) and `make test` (the whole suite).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/test
export DJANGO_SETTINGS_MODULE := benchviewer.settings

.PHONY: demo test install lint test-sqlite test-postgres services

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py demo_user
	$(BIN)/python manage.py generate_demo data/demo --replace
	$(BIN)/python manage.py import_packs data/demo $(wildcard ../shared/reference)
	@echo "Benchviewer: http://127.0.0.1:8000  (log in with the demo user printed above)"
	$(BIN)/python manage.py runserver 127.0.0.1:8000

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

services:
	bash scripts/services.sh

test-sqlite: install
	$(BIN)/pytest tests -q -n 2

# The import suite again on PostgreSQL (rows go in by COPY there), plus the Redis + Celery worker tests.
test-postgres: install services
	DATABASE_URL=$(PG_URL) $(BIN)/pytest -q -m "not browser" tests/imports/test_import_reference.py \
		tests/imports/test_import_bad_input.py tests/imports/test_import_concurrency.py tests/imports/test_celery_worker.py \
		tests/faults/test_faults.py tests/viewer/test_step_search.py tests/imports/test_hostile_input.py tests/viewer/test_viewer_api.py \
		tests/imports/test_import_harbor_layouts.py tests/imports/test_import_batches.py tests/imports/test_blob_storage.py \
		tests/site/test_redaction_everywhere.py

test: lint test-sqlite test-postgres
