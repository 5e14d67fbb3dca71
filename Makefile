# The README's two commands: `make demo` and `make test`. Both set up .venv by themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint typecheck clean venv

venv: $(STAMP)

$(STAMP): setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/solarian-agent demo

test: $(STAMP)
	sh scripts/install_browser.sh
	$(PY) -m ruff check solarian_agent test
	$(PY) -m mypy
	$(PY) -m pytest -q

bench: $(STAMP)
	$(VENV)/bin/solarian-agent bench

lint: $(STAMP)
	$(PY) -m ruff check solarian_agent test

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info
