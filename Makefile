# make demo: the main job on the bundled example with the mock agent.
# make test: everything, from a fresh clone (creates .venv, installs what the tests need).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SRC := skilltune tests benchmarks tools

CLIS := agentclis
CLI_STAMP := $(CLIS)/node_modules/.installed-stamp

.PHONY: install check test demo bench-verdicts bench-proposals bench-throughput bench-agents bench-startup bench-report screenshots agent-clis chromium clean

$(STAMP): pyproject.toml requirements/ci.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements/ci.txt -e '.[dev,api,ray]'
	touch $(STAMP)

# plotly.js's cartesian bundle, pinned in skilltune/report/static/package-lock.json: report.html inlines
# it (1.5 MB). Without npm the report inlines the full bundle the plotly package ships (4.8 MB).
PLOTLY := skilltune/report/static
PLOTLY_STAMP := $(PLOTLY)/node_modules/.installed-stamp
$(PLOTLY_STAMP): $(PLOTLY)/package.json $(PLOTLY)/package-lock.json
	if command -v npm >/dev/null; then \
		npm ci --prefix $(PLOTLY) --no-audit --no-fund --loglevel=error >/dev/null && touch $(PLOTLY_STAMP); \
	else echo "warning: npm is missing: report.html inlines plotly's full bundle (4.8 MB), not the cartesian one (1.5 MB)"; fi

install: $(STAMP) $(PLOTLY_STAMP)

# The real agent CLIs at the versions in agentclis/package-lock.json (integration tests drive them
# against a local fake model server), ripgrep, which opencode needs and cannot download offline, and
# bubblewrap, which seals each rollout (docs/sandbox.md).
$(CLI_STAMP): $(CLIS)/package.json $(CLIS)/package-lock.json
	# npm install, not npm ci: npm 11 leaves other platforms' optional binaries out of the lock,
	# which npm ci rejects; install still follows the lock (it is left unchanged).
	npm install --prefix $(CLIS) --no-audit --no-fund --loglevel=error
	command -v rg >/dev/null || { command -v apt-get >/dev/null && \
		{ apt-get install -y -q ripgrep >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q ripgrep >/dev/null; }; }; } || \
		echo "warning: ripgrep (rg) is missing and could not be installed: opencode's tests will be skipped"
	command -v bwrap >/dev/null || { command -v apt-get >/dev/null && \
		{ apt-get install -y -q bubblewrap >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }; }; } || \
		echo "warning: bubblewrap (bwrap) is missing and could not be installed: rollouts run unsealed and the sandbox tests are skipped"
	touch $(CLI_STAMP)

agent-clis: $(CLI_STAMP)

# Debian's Chromium for the report and view tests (Playwright drives it; it never downloads a browser).
CHROMIUM ?= /usr/bin/chromium
chromium:
	test -x $(CHROMIUM) || { command -v apt-get >/dev/null && \
		{ apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; }; } || \
		echo "warning: $(CHROMIUM) is missing and could not be installed: the browser tests will be skipped"

check: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy
	$(BIN)/python tools/check_import_cycles.py skilltune
	$(BIN)/python tools/check_layers.py skilltune

# Two workers whatever the machine (tests wait on agent CLIs and servers more than on the CPU);
# --dist loadfile keeps each test file in one worker. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
test: check $(CLI_STAMP) $(PLOTLY_STAMP) chromium
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

demo: $(STAMP) $(PLOTLY_STAMP)
	$(BIN)/skilltune train examples/mock-demo/suite --skill examples/mock-demo/skill \
		--agent mock --proposer mock --tag demo --max-steps 8 --seed 1 --force

# The verdicts benchmark (quick preset): prints the table and writes benchmarks/results/verdicts.json.
bench-verdicts: $(STAMP)
	$(BIN)/python benchmarks/verdicts.py --quick

# Many small proposals a step from a weak analyst (issue 31), simulated, 300 runs a design (minutes):
# prints the table, writes benchmarks/results/proposals-quick.json. The full figures (2,000 runs a
# design): $(BIN)/python benchmarks/proposals.py -> benchmarks/results/proposals.json.
bench-proposals: $(STAMP)
	$(BIN)/python benchmarks/proposals.py --quick

# Harness overhead, parallel efficiency, local vs Ray: benchmarks/results/throughput.json.
bench-throughput: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

# Several agents' batch, one agent after another vs side by side: benchmarks/results/agents_overlap.json.
bench-agents: $(STAMP)
	$(BIN)/python benchmarks/agents_overlap.py

# Start-up of --version, --help and validate, before (main at 11fafbb) and after, beside the floor
# (the bare imports of typer, pydantic and rich): benchmarks/results/startup.json.
bench-startup: $(STAMP)
	$(BIN)/python benchmarks/startup.py

# report.html for a synthetic run of 200 units and 50,000 rollouts: generation time, size, load time in
# headless Chromium: benchmarks/results/report.json.
bench-report: $(STAMP) $(PLOTLY_STAMP) chromium
	$(BIN)/python benchmarks/report.py

# The screenshots of the report and of `skilltune view` under docs/ (taken by their browser tests).
screenshots: $(STAMP) $(PLOTLY_STAMP) chromium
	SKILLTUNE_SCREENSHOTS=docs $(BIN)/pytest -q tests/test_report_browser.py tests/test_view.py -k screenshot

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .pytest_cache
