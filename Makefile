# Two entry points for a fresh machine: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install install-test demo test

install:
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e .

install-test:
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[test]"

demo: install
	clbench run

test: install-test
	$(PYTHON) -m pytest
