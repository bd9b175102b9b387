# make demo: the main job on the bundled example with the mock agent.
# make test: everything, from a fresh clone (creates .venv, installs what the tests need).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SRC := skilltune tests benchmarks

.PHONY: install check test demo bench-verdicts clean

$(STAMP): pyproject.toml requirements/ci.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements/ci.txt -e '.[dev,api]'
	touch $(STAMP)

install: $(STAMP)

check: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy

test: check
	$(BIN)/pytest

demo: $(STAMP)
	$(BIN)/skilltune train examples/mock-demo/suite --skill examples/mock-demo/skill \
		--agent mock --proposer mock --tag demo --max-steps 8 --seed 1 --force

# The verdicts benchmark (quick preset): prints the table and writes benchmarks/results/verdicts.json.
bench-verdicts: $(STAMP)
	$(BIN)/python benchmarks/verdicts.py --quick

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .pytest_cache
