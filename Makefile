# tmdsub: set-up and entry points.  `make run` and `make test` are the two README commands.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)

# Quiet, local-only defaults for the stack (telemetry off, no external servers needed).
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 180
export PREFECT_LOGGING_LEVEL ?= WARNING
export PREFECT_HOME ?= $(CURDIR)/.prefect
export MLFLOW_DISABLE_TELEMETRY := true
export MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR := false
export DVC_NO_ANALYTICS := 1
export DO_NOT_TRACK := 1
export POT_BACKEND_DISABLE_PYTORCH := 1
export NUMBA_CACHE_DIR ?= $(CURDIR)/.venv/numba-cache
# dvc.yaml's stage commands call `tmdsub`, installed in the venv.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup run test test-fast test-all bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	# scikit-learn-extra (the k-medoids package the paper used): its wheel breaks under numpy 2; build it.
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-binary scikit-learn-extra scikit-learn-extra==0.3.0
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(VENV)/bin/dvc repro
	$(VENV)/bin/tmdsub summary

# The default suite (what CI runs) on both cores; whole test files stay on one worker (their module fixtures).
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile

# The inner loop: tests/lib (library units, reference values, property tests with few examples); the tiers follow the
# folders: tests/pipeline (flows, CLI, DVC) and tests/servers (real servers) are left out.
test-fast: setup
	HYPOTHESIS_PROFILE=fast $(PY) -m pytest -q -n 2 -m "not slow" tests/lib

test-all: setup
	$(PY) -m pytest -q -n 2 --dist loadfile -m "slow or not slow"

bench: setup
	$(PY) benchmarks/tmd_speed.py

clean:
	rm -rf $(VENV) .prefect mlflow.db mlruns
