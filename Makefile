# Two entry points for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test lint clean

$(BIN)/bringup: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

setup: $(BIN)/bringup ## create .venv with bringup and the dev tools

demo: setup ## judge the embedded demo fleet of B300 nodes, print the table and run directory
	@# The demo fleet has faulty nodes on purpose, so bringup exits 1: only 2+ is an error.
	$(BIN)/bringup check --demo --profile b300 --out runs/demo-$$(date +%Y%m%dT%H%M%S); test $$? -le 1

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: setup lint ## lint, then every test (real fio where installed)
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
