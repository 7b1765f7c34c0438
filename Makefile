# The two set-up commands: `make run` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000
export BENCH_TINY_MODEL_DIR ?= $(CURDIR)/var/tiny-model
# These machines set PYTHONDONTWRITEBYTECODE=1: every process would compile its imports from
# source again (the suite starts hundreds: engines, Celery workers, CLIs). Byte code goes to
# __pycache__ (ignored by git), written by the first process that imports a module: compiling
# all of site-packages at install (uv --compile-bytecode: 27,000 files, 50 s of CPU) costs four
# times what the modules the service and the suite import do.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test test-fast model os-packages browser prometheus docs docs-build clean

# uv installs the same packages as pip in a fraction of the time (about 30 s instead of 2+ min
# here); it reads pip's find-links (where torch's CPU wheel may live) from the environment or
# pip's configuration. Without uv on the index, pip does the same job.
FIND_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV_LINKS := $(foreach d,$(FIND_LINKS),--find-links $(d))
EXTRAS := '.[web,dev,cpu-engine]'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv || true
	if [ -x $(VENV)/bin/uv ]; then $(VENV)/bin/uv pip install -q --python $(PY) $(UV_LINKS) -e $(EXTRAS); \
	else $(PY) -m pip install -q -e $(EXTRAS); fi
	$(PY) -m runners cpu-engine-setup
	touch $(STAMP)

install: $(STAMP)

model: install
	$(PY) -m runners tiny-model $(BENCH_TINY_MODEL_DIR)

# Web + workers on embedded defaults (SQLite, filesystem broker), a demo benchmark, one run.
run: model
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bench_demo --port $(PORT)

# The documentation site (mkdocs.yml, pages in docs/) at http://127.0.0.1:8001/, rebuilt on each save.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve -a 127.0.0.1:8001

# --strict: a broken link, a missing anchor or a page left out of the navigation fails the build.
docs-build: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# Debian packages the tests drive: Chromium for the dashboard's browser test (no browser
# download), Prometheus and promtool for the metrics tests (a real scrape, the alert rules
# checked). One after the other: two apt-gets at once fail on apt's lock.
CHROMIUM_OK := test -x /usr/lib/chromium/chromium -a -x /usr/bin/chromedriver
PROMETHEUS_OK := test -x /usr/bin/prometheus -a -x /usr/bin/promtool
os-packages:
	@$(CHROMIUM_OK) && $(PROMETHEUS_OK) || apt-get update -qq
	@$(CHROMIUM_OK) || apt-get install -y -qq chromium chromium-driver >/dev/null
	@$(PROMETHEUS_OK) || apt-get install -y -qq --no-install-recommends prometheus >/dev/null

browser prometheus: os-packages

# The architecture rules (import-linter), the docs site built with --strict, then two passes at the same time, each on 2 xdist
# workers: the whole suite on SQLite with the real vLLM CPU engine (but the end-to-end run), and
# every test that uses the database on PostgreSQL (web, service, webhook, and the real end-to-end
# run; pure-Python tests and the pages in Chromium are not repeated), with the tests marked
# `postgres_pass` (the faults, the end-to-end runs). The PostgreSQL pass prints its log when both are done.
# Then the tests marked `alone`, by themselves: the real bisection judges speeds measured
# minutes apart, and the passes' load moves the tiny model's speed tenfold.
# The files that hold tests marked `alone` (collecting only those saves the serial phase seconds).
ALONE_FILES = $(shell grep -rl --include='*.py' 'pytest.mark.alone' tests)
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test
PYTEST := $(PY) -m pytest -p no:cacheprovider -ra --durations=15 -n 2 --dist loadgroup
test:
	@$(MAKE) --no-print-directory -j2 model os-packages  # the install and the Debian packages at the same time
	$(VENV)/bin/lint-imports
	@$(MAKE) --no-print-directory docs-build
	@mkdir -p var/logs
	@DATABASE_URL=$(TEST_POSTGRES_URL) $(PYTEST) -m "(database or postgres_pass) and not alone and not browser and not sqlite_only" > var/logs/test-postgres.log 2>&1 & pg=$$!; \
	echo "=== SQLite pass (the PostgreSQL pass runs beside it: var/logs/test-postgres.log) ==="; \
	$(PYTEST) -m "not postgres_pass and not alone"; sqlite=$$?; \
	wait $$pg; postgres=$$?; \
	echo "SQLite pass exit $$sqlite, PostgreSQL pass exit $$postgres"; \
	echo "=== PostgreSQL pass ==="; cat var/logs/test-postgres.log; \
	echo "=== Alone, on PostgreSQL (the real bisection) ==="; \
	DATABASE_URL=$(TEST_POSTGRES_URL) $(PY) -m pytest -p no:cacheprovider -ra --durations=5 -m alone $(ALONE_FILES); alone=$$?; \
	test $$sqlite = 0 -a $$postgres = 0 -a $$alone = 0

# Everything but the tests that start a real engine.
test-fast: install
	$(PYTEST) -m "not engine"

clean:
	rm -rf $(VENV) var db.sqlite3 site
