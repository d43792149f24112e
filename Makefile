# recollect — two commands on a fresh machine:
#   make demo   set everything up, then answer questions about the sample dialogue with live traces
#   make test   set everything up, then run the whole suite (unit, integration, service)
# Expensive artefacts (the llama.cpp runtime wheel, the joined model) are cached in ~/.cache/recollect,
# outside the clone, so a second run on the same machine takes seconds.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: venv setup demo test unit integration lint typecheck bench clean

$(STAMP): pyproject.toml
	@echo "==> creating virtual environment in $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --disable-pip-version-check -q --upgrade pip
	@echo "==> installing torch 2.13.0 (local CPU build) before anything that needs it"
	@$(BIN)/python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null \
	  || $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on "torch==2.13.0"
	@echo "==> installing recollect and its dependencies"
	@$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e ".[embeddings,serve,eval,plots,dev,postgres]"
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

setup: venv
	@echo "==> llama.cpp runtime and default model (cached in ~/.cache/recollect)"
	@$(BIN)/recollect setup

demo: setup
	@$(BIN)/recollect demo

lint: venv
	@$(BIN)/ruff check app graphs tests benchmarks

# mypy checks the package `recollect` (pyproject's [tool.mypy]); it finds app/ and graphs/ under those names
# through these two links (mypy can neither map a folder to another name nor follow the editable install).
typecheck: venv
	@mkdir -p build/mypy/app build/mypy/graphs/recollect
	@ln -sfn ../../../app build/mypy/app/recollect
	@ln -sfn ../../../../graphs build/mypy/graphs/recollect/graphs
	@$(BIN)/python -m mypy

unit: venv
	@$(BIN)/python -m pytest tests -q -m "not integration and not service" $(PYTEST_ARGS)

integration: setup
	@$(BIN)/python -m pytest tests -q -m "integration or service" $(PYTEST_ARGS)

test: setup lint typecheck
	@$(BIN)/python -m pytest tests -q $(PYTEST_ARGS)

bench: setup
	@$(BIN)/python benchmarks/overhead.py
	@$(BIN)/python benchmarks/memr3_vs_rag.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build/mypy .langgraph_api
