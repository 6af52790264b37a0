# hwbridge: every target installs what it needs into .venv first (quick when nothing changed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-run test lint typecheck pytest docs demo bench wheel wheel-check clean

# the project with its development tools (tests, linters, MF4 replay)
install: $(DEV_STAMP)

# the project alone: what the demo needs
install-run: $(RUN_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml src/hwbridge/__about__.py | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml src/hwbridge/__about__.py | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev]"
	@touch $(RUN_STAMP) $(DEV_STAMP)

lint: install
	$(BIN)/ruff check src firmware-sim tests benchmarks examples .ci docs/conf.py docs/_ext
	$(BIN)/ruff format --check src firmware-sim tests benchmarks examples .ci docs/conf.py docs/_ext

typecheck: install
	$(BIN)/mypy

# two workers, one per core of the CI machine: the suite runs in about half the time
pytest: install
	$(BIN)/pytest -n 2

test: lint typecheck docs pytest

# the Sphinx site of docs/ into docs/_build/html; a warning is an error (-W)
docs: install
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html

demo: install-run
	$(BIN)/hwbridge demo

# the sdist and the wheel built from it, into dist/ (`pip install dist/mcs_hwbridge-*.whl`)
wheel: install
	$(BIN)/python -m build --no-isolation --outdir dist .

# the sdist, the wheel built from it, installed into a fresh venv and run from a temp folder
wheel-check: install
	$(BIN)/python .ci/wheel_smoke.py

bench: install
	$(BIN)/python -m pip install -q --disable-pip-version-check mcs-driver-core
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist docs/_build
