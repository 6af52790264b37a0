# hwbridge: every target installs what it needs into .venv first (quick when nothing changed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-run test test-fast lint typecheck pytest docs demo bench wheel wheel-check clean

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

# ruff, then the layer order of docs/layout.md: every package imports only from the layers
# below it, no circles (.ci/check_layers.py; tests/test_layers.py shows it failing)
lint: install
	$(BIN)/ruff check src firmware-sim tests benchmarks examples .ci docs/conf.py docs/_ext
	$(BIN)/ruff format --check src firmware-sim tests benchmarks examples .ci docs/conf.py docs/_ext
	$(BIN)/python .ci/check_layers.py src

typecheck: install
	$(BIN)/mypy

# five workers on the 2-core CI machine, handing out tests as they free up: half of the
# suite's time is waiting (sockets, timers, the programs it starts), so two workers kept the
# cores half idle. Measured on the 2-core machine: -n 2 5m15 (311 s of CPU), -n 4 3m20 (both
# all passed); with the suite at 2,580 tests, -n 4 237 s and -n 5 218 s (404 s of CPU, the
# cores 93% busy); .ci/stress.py runs this with one core kept busy. Each worker starts with its
# share of the tests marked slow (tests/conftest.py: slow_first), so none is left to the end.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# otherwise each worker and each program a test starts compiles the project again
# (collection 17 s a worker, 8 s cached)
WORKERS := 5
pytest: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(WORKERS) --dist worksteal

test: lint typecheck docs pytest

# the inner loop: every test that is neither live (real time, real processes: see
# tests/conftest.py) nor slow; `make test` runs them all
test-fast: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(WORKERS) --dist worksteal -m "not live and not slow"

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
