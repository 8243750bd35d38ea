# streamscale: `make run` starts the product, `make test` runs the whole test suite.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install run test test-fast test-external lint bench-throughput bench-rescale clean-var

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The JVM class archive drivers start from (engine/runtime/spark/class_archive.py): made once
# per Java and PySpark install; without it drivers start as well, only slower.
install: $(STAMP)
	@$(PY) -m engine class-archive || echo "install: no JVM class archive made (above); drivers start without it"

run: install
	$(PY) -m webapp.launcher run

test: install
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m "not spark and not browser"

# The tests that talk to PostgreSQL or Redis (but for the Spark and browser ones, which
# make test runs), against the servers DATABASE_URL and REDIS_URL name.
test-external: $(STAMP)
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" || { echo "test-external: set DATABASE_URL and REDIS_URL" >&2; exit 2; }
	$(PY) -m pytest -m "services and not browser and not spark"

lint: $(STAMP)
	$(VENV)/bin/ruff check engine webapp bench tests
	$(VENV)/bin/mypy engine

bench-throughput: $(STAMP)
	$(PY) -m bench throughput

bench-rescale: $(STAMP)
	$(PY) -m bench rescale

clean-var:
	$(PY) -m webapp.launcher stop-services || true
	rm -rf var
