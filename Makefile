# Entry points for a fresh machine: `make demo`, `make test` (the fast tier, minutes) and `make test-all` (every
# test, as CI runs them). Each installs what it needs.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# pytest-xdist workers: one per core, at most 4 (each holds torch and a model in memory)
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")
PYTEST := $(PYTHON) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

.PHONY: install install-test demo test test-all

install:
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e .

install-test:
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[test]"

demo: install
	clbench run

# The fast tier: every test file, without the tests marked slow (end to end: chaos, signals, pools, the campaign
# dry run, the real MiniLM) or slurm (a real cluster).
test: install-test
	$(PYTEST) -m "not slow and not slurm"

# Everything, as CI runs it: the fast tier and the slow tests in parallel, then the real-cluster tests one at a time
# (they time SLURM's own delays); the duration and the 15 slowest tests are printed at the end.
test-all: install-test
	@start=$$(date +%s); \
	$(PYTEST) -m "not slurm" --durations=15 && \
	$(PYTHON) -m pytest -p no:cacheprovider -m slurm --durations=5; \
	code=$$?; echo "test-all: $$(( $$(date +%s) - start )) s in all (exit $$code)"; exit $$code
