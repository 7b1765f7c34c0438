# The two set-up commands: `make run` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000
export BENCH_TINY_MODEL_DIR ?= $(CURDIR)/var/tiny-model

.PHONY: install run test test-fast model browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[web,dev,cpu-engine]'
	$(PY) -m runners cpu-engine-setup
	touch $(STAMP)

install: $(STAMP)

model: install
	$(PY) -m runners tiny-model $(BENCH_TINY_MODEL_DIR)

# Web + workers on embedded defaults (SQLite, filesystem broker), a demo benchmark, one run.
run: model
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bench_demo --port $(PORT)

# The dashboard's browser test drives Debian's Chromium (no browser download).
browser:
	@test -x /usr/bin/chromedriver || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)

# The whole suite on SQLite, the real vLLM CPU engine included; then every test that needs no
# engine again on PostgreSQL.
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/test
test: model browser
	$(PY) -m pytest -p no:cacheprovider -ra
	DATABASE_URL=$(TEST_POSTGRES_URL) $(PY) -m pytest -p no:cacheprovider -ra -m "not engine"

# Everything but the tests that start a real engine.
test-fast: install
	$(PY) -m pytest -p no:cacheprovider -ra -m "not engine"

clean:
	rm -rf $(VENV) var db.sqlite3
