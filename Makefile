# Two commands on a fresh machine: `make run` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CONSTRAINTS := constraints.txt
SCENARIO?= examples/scenarios/diurnal-shop.yaml
KB      ?= .intent-planner/kb
# `make run` keeps its knowledge base in $(KB) (events, models, planner memory): a second
# `make run` starts from what the first learned. `make run KB=memory` keeps nothing.
APT_PACKAGES := haproxy prometheus
PYTEST_WORKERS ?= 2
# pytest-xdist processes (CI has 2 cores); PYTEST_WORKERS=0 runs in one process. `--dist
# loadgroup`: the tests that share a scenario's simulated run form one group, run by one worker
# (tests/support/runs.py), and the biggest groups, then the tests marked `slow`, are handed out
# first (tests/conftest.py). The slowest tests are listed at the end (keep `make test` under 10
# minutes).
# Property tests run with a fixed seed here (a CI result is reproducible); run pytest directly
# for fresh random examples.

.PHONY: install constraints system-packages run test lint typecheck layers pytest bench clean

install: $(STAMP)

# Installed at the versions in constraints.txt, the ones make test last passed with: a new
# release of a dependency cannot break a fresh clone (pymongo 4.20 and PyYAML 6.0.4 did).
$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[dev]'
	touch $(STAMP)

# The newest versions pyproject.toml allows, written to constraints.txt in a scratch
# virtualenv; then `make test` and commit both.
constraints:
	rm -rf .venv-constraints
	$(PY) -m venv .venv-constraints
	.venv-constraints/bin/pip install --quiet --upgrade pip
	.venv-constraints/bin/pip install --quiet -e '.[dev]'
	{ sed -n '1,3p' $(CONSTRAINTS); .venv-constraints/bin/pip freeze --exclude-editable; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf .venv-constraints

# Debian packages the tests start for real (HAProxy, Prometheus), installed when missing.
# Independent of the virtualenv: `make test` installs both at once.
system-packages:
	@missing=""; \
	command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing="$$missing haproxy"; \
	command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

run: install
	$(BIN)/intent-planner run --scenario $(SCENARIO) --kb $(KB)

lint: install
	$(BIN)/ruff check planner actuators knowledge simulator tests bench

typecheck: install
	$(BIN)/mypy

# Layers point one way (contract in pyproject.toml, no ignores).
layers: install
	$(BIN)/lint-imports

pytest: install system-packages
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=15 --hypothesis-seed=0

# Two jobs: apt installs the Debian packages while pip installs the virtualenv, then lint,
# typecheck and layers run beside the rest of apt and beside each other (each target's output
# is printed when it ends); pytest runs alone (it uses both cores).
test:
	$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck layers system-packages
	$(MAKE) --no-print-directory pytest

# Benchmarks print their figures (see docs/benchmarks.md); about 25 minutes in all.
bench: install system-packages
	$(BIN)/python bench/table.py
	$(BIN)/python bench/models.py
	$(BIN)/python bench/fit.py
	$(BIN)/python bench/slo.py
	$(BIN)/python bench/dispatch.py
	$(BIN)/python bench/watch.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build *.egg-info
