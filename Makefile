# The two commands of the README. Both create .venv (Python 3.12 via .python-version) and install on first use.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test test-fast bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else "gensbi_sharding needs Python >= 3.12, found " + sys.version.split()[0] + ": install 3.12 (pyenv install 3.12) or run make PYTHON=python3.12")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e ".[test,gensbi]"
	@touch $(STAMP)

ARGS ?= mesh=auto rule=tensor

run: $(STAMP)
	$(VENV)/bin/python launch.py $(ARGS)

# Test files run in parallel (pytest-xdist), each file whole in one worker so its module fixtures
# run once, the longest files first (tests/conftest.py orders them; --no-loadscope-reorder keeps that
# order instead of xdist's most-tests-first); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(XDIST) $(PYTEST_ARGS)

# Everything but the end-to-end runs, sweeps, multi-process tests and the tests that start a process or take over
# ~0.5 s (@pytest.mark.slow), and of a parametrised family of checks only its first few cases (@pytest.mark.fast_cases(n),
# tests/conftest.py marks the rest slow): a quick check, under 3 minutes on 2 cores.
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

# Every benchmark runs even where one misses its target (exit 1: on a busy machine a ratio can miss); make bench then
# fails at the end, naming them.
BENCHES := shard_model step_overhead init

bench: $(STAMP)
	@failed=""; for b in $(BENCHES); do $(VENV)/bin/python benchmarks/$$b.py || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "make bench: missed or failed:$$failed (their tables above)"; exit 1; fi

clean:
	rm -rf $(VENV)
