# seglog — every set-up step lives here, so a fresh machine needs only `make run` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Two installs: `make run` needs only the replay extra (a few hundred MB); `make test` needs every extra in
# pyproject.toml (dev, spark, ...: about 1 GB with pyspark). Each has its own stamp, so a venv first made by
# `make run` gets the missing extras on the first `make test`, and a venv made by `make test` already holds
# all that `make run` needs (its install touches both stamps).
RUN_EXTRAS  ?= replay
TEST_EXTRAS := $(shell $(PYTHON) -c "import tomllib; print(','.join(tomllib.load(open('pyproject.toml','rb'))['project']['optional-dependencies']))")
RUN_STAMP   := $(VENV)/.seglog-installed-run
STAMP       := $(VENV)/.seglog-installed-test

# (Re)install when pyproject.toml, setup.py or the C module change; the editable install keeps the console
# script `seglog` and the pytest plugin pointing at this tree.
$(RUN_STAMP): pyproject.toml setup.py segments/_speedups.c segments/_kafka_speedups.c segments/_kafka_records.h
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(RUN_EXTRAS)]'
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml setup.py segments/_speedups.c segments/_kafka_speedups.c segments/_kafka_records.h
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(TEST_EXTRAS)]'
	touch $(STAMP) $(RUN_STAMP)

# Everything `make test` needs (what a developer wants); `make venv-run` is the smaller set of `make run`.
venv: $(STAMP)

venv-run: $(RUN_STAMP)

lint: venv
	$(VENV)/bin/ruff check seglog engine indexes segments server tools tests bench conftest.py
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy -p seglog

# Debian's kcat for the Kafka-wire smoke test (tests/server/test_serve_process.py skips it when absent): installed
# with apt-get when running as root where apt-get exists; never fails the build.
kcat:
	@command -v kcat >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get install -y -q kcat >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	    apt-get install -y -q kcat >/dev/null 2>&1; }; }; } || echo "kcat not installed: its smoke test is skipped" >&2

# pytest exits 5 when a selection collects no test (e.g. `-m spark` without the
# extra); that is not a failure of the code, so it is reported and mapped to 0.
pytest: venv kcat
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests for this selection" >&2; rc=0; fi; exit $$rc

# The segment and engine tests once more on the pure-Python codec (SEGLOG_PURE_PYTHON=1: the path an
# install without a C compiler runs), so that both stay correct; ~30 s.
pytest-pure: venv
	SEGLOG_PURE_PYTHON=1 $(PY) -m pytest -q -m "not spark" tests/segments tests/engine

test: lint typecheck pytest pytest-pure

# Without the JVM-backed Spark tests and the wheel build-and-install tests (about two minutes faster).
test-fast: PYTEST_ARGS = -m "not spark and not packaging"
test-fast: lint typecheck pytest

# pytest (not spark, not packaging), then pytest-pure, RUNS times while one spinning process per core keeps
# every core busy; lists every test that failed at least once and fails if any did. A race test that
# only passes on an idle machine shows up here. PYTEST_ARGS narrows it: make stress RUNS=20 PYTEST_ARGS=tests/segments
RUNS ?= 5
stress: venv
	RUNS='$(RUNS)' PYTEST_ARGS='$(PYTEST_ARGS)' $(PY) .ci/stress

# The main job: replay the bundled sample workload (examples/, fixed seed) at its recorded pace into
# the embedded default log directory ./data, with two tailing consumers measuring end-to-end latency;
# the report (JSON) goes to ./reports, with PNG plots when the venv has the plots extra (matplotlib, ~170 MB:
# `make run RUN_EXTRAS=replay,plots`, or any venv made by `make test`).
run: venv-run
	$(VENV)/bin/seglog replay examples/sample-workload.parquet --log-dir data --report reports/replay.json --consumers 2

bench: venv
	$(VENV)/bin/seglog bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
