# Two commands on a fresh machine:
#   make demo   install, build/find llama-server, make lab models, run a matrix, print the summary
#   make test   lint, type-check and the test suite (drives a real llama-server)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint typecheck unit engine browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/specbench demo --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports  # the layer order and no import cycles ([tool.importlinter] in pyproject.toml)

typecheck: $(STAMP)
	$(BIN)/mypy

# Build (or find) llama-server and install vLLM's CPU build before pytest: the first build takes
# ~15-20 min on 2 cores and the vLLM venv ~5 min (3.4 GB), longer than pytest-timeout allows one
# test; later calls return at once from the cache (~/.cache/specbench, or $$SPECBENCH_CACHE).
engine: $(STAMP)
	$(BIN)/specbench engine install llamacpp
	$(BIN)/specbench engine install vllm

# Headless Chromium and a CJK font for tests/report/test_browser.py (it skips without chromium).
# Installed with apt-get where we are root on Debian/Ubuntu (CI is); elsewhere a note says how.
browser:
	@if command -v chromium >/dev/null && fc-list 2>/dev/null | grep -q "Noto Sans CJK"; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null; \
	else echo "note: no chromium or CJK font; install chromium and fonts-noto-cjk to run the browser test"; fi

test: lint typecheck engine browser
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest -m "not engine"

clean:
	rm -rf $(VENV) runs .mypy_cache .ruff_cache .pytest_cache
