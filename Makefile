# Two entry points for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup setup-test demo test test-fast gpu-rehearsal lint docs-cli clean

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

test: setup-test lint ## lint, then every test (root-only and apt-backed tests skip with a reason)
	$(BIN)/pytest -q

# The inner loop: the pure, in-process tier (tests/unit): no child processes, sshd, torch
# ranks, fio or Ansible runs. Some of its report fixtures call the gemm and p2p probes
# in-process on the CPU, so it installs what `make test` installs (torch among them).
test-fast: setup-test ## the unit tests only, in about a minute
	$(BIN)/pytest -q -p no:cacheprovider tests/unit

# benchmarks/gpu_check.sh end to end on this CPU as the lent GPU machine runs it (docs/gpu-run.md):
# the tree as it travels, the carried wheels offline, the simulated NVML, a 600 s cap.
gpu-rehearsal: setup-test ## rehearse the one GPU run on the CPU, in a few minutes
	$(BIN)/python -m tests.support.gpu_rehearsal

docs-cli: setup ## rewrite docs/cli.md, the option table, from the commands themselves
	$(BIN)/python -m bringup.commands.options docs/cli.md

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
