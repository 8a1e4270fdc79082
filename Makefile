# seglog — every set-up step lives here, so a fresh machine needs only `make run` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.seglog-installed
EXTRAS ?= dev,replay,spark

.PHONY: venv lint typecheck pytest pytest-pure test test-fast run bench clean

# (Re)install when pyproject.toml, setup.py or the C module change; the editable install keeps the console
# script `seglog` and the pytest plugin pointing at this tree.
$(STAMP): pyproject.toml setup.py segments/_speedups.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(VENV)/bin/ruff check seglog engine indexes segments tools tests bench
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy -p seglog

# pytest exits 5 when a selection collects no test (e.g. `-m spark` without the
# extra); that is not a failure of the code, so it is reported and mapped to 0.
pytest: venv
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests for this selection" >&2; rc=0; fi; exit $$rc

# The segment and engine tests once more on the pure-Python codec (SEGLOG_PURE_PYTHON=1: the path an
# install without a C compiler runs), so that both stay correct; ~30 s.
pytest-pure: venv
	SEGLOG_PURE_PYTHON=1 $(PY) -m pytest -q -m "not spark" tests/segments tests/engine

test: lint typecheck pytest pytest-pure

# Without the JVM-backed Spark tests (about a minute faster).
test-fast: PYTEST_ARGS = -m "not spark"
test-fast: lint typecheck pytest

# The main job: replay the bundled sample workload (examples/, fixed seed) at its recorded pace into
# the embedded default log directory ./data, with two tailing consumers measuring end-to-end latency;
# the report (JSON) and plots (PNG) go to ./reports.
run: venv
	$(VENV)/bin/seglog replay examples/sample-workload.parquet --log-dir data --report reports/replay.json --consumers 2

bench: venv
	$(VENV)/bin/seglog bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
