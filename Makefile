# Two entry points for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup setup-test demo test test-fast test-random gpu-rehearsal lint docs-cli clean

# The controller and the dev tools: enough for the demo, check, inspect and report.
$(BIN)/bringup: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# Everything the tests exercise: also the burn-in (torch, DeepSpeed, ...) and Ansible.
# torch is pinned first to the CPU build this workplace ships; an open range would pull
# a multi-GB CUDA build.
$(VENV)/.test-deps: $(BIN)/bringup
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,burnin,provision]'
	@touch $@

setup: $(BIN)/bringup ## create .venv with bringup and the dev tools

setup-test: $(VENV)/.test-deps

demo: setup ## judge the embedded demo fleet of B300 nodes, print the table and run directory
	@# The demo fleet has faulty nodes on purpose, so bringup exits 1: only 2+ is an error.
	$(BIN)/bringup check --demo --out runs/demo-$$(date +%Y%m%dT%H%M%S); test $$? -le 1

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# In file order (pytest-randomly off: `make test-random` shuffles), on two pytest-xdist
# workers that each take a whole file at a time (`--dist loadfile`: a file's shared cluster
# stays in one process; the suite waits on processes more than it computes, so two take
# about half the time on 2 cores: docs/contributing.md). The 25 slowest tests and the wall
# time print at the end, so a slower suite shows in every CI log.
test: setup-test lint ## lint, then every test (root-only and apt-backed tests skip with a reason)
	@start=$$(date +%s); status=0; \
	$(BIN)/pytest -q -p no:randomly -n 2 --dist loadfile --durations=25 || status=$$?; \
	echo "make test: wall time $$(( $$(date +%s) - start )) s"; exit $$status

# Every tier in a random order (pytest-randomly), one seed for all: the unit tier, then each
# integration folder on its own, so a test that passes only after another one fails here.
# Again in the same order: make test-random SEED=<the seed it printed>.
SEED ?= $(shell $(PYTHON) -c 'import random; print(random.randrange(1, 2**31))')
test-random: setup-test ## the unit tier and each integration folder in a random order (SEED=)
	@echo "test-random: seed $(SEED) (again: make test-random SEED=$(SEED))"
	@status=0; \
	for tier in tests/unit tests/integration/*/; do \
		case $$tier in *__pycache__*) continue ;; esac; \
		echo "== $$tier (seed $(SEED))"; \
		$(BIN)/pytest -q -p no:cacheprovider -p randomly --randomly-seed=$(SEED) \
			$$tier || { status=1; failed="$$failed $$tier"; }; \
	done; \
	[ $$status = 0 ] || echo "test-random: seed $(SEED) failed in:$$failed"; exit $$status

# The inner loop: the pure, in-process tier (tests/unit): no child processes, sshd, torch
# ranks, fio or Ansible runs. Some of its report fixtures call the gemm and p2p probes
# in-process on the CPU, so it installs what `make test` installs (torch among them).
test-fast: setup-test ## the unit tests only, in about a minute
	$(BIN)/pytest -q -p no:cacheprovider tests/unit

# benchmarks/gpu_check.sh end to end on this CPU as the lent GPU machine runs it (docs/gpu-run.md):
# the tree as it travels, the carried wheels offline, the simulated NVML, a 600 s cap.
gpu-rehearsal: setup-test ## rehearse the one GPU run on the CPU, in a few minutes
	$(BIN)/python -m tests.support.gpu_rehearsal

docs-cli: setup ## rewrite docs/cli.md and the TAB table from the commands themselves
	$(BIN)/python -m bringup.commands.options docs/cli.md
	$(BIN)/python -m bringup.commands.tab_table

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
