# Two commands on a fresh machine: `make run` and `make test`. Everything installs into .venv.
# `make run` installs what running needs (the server, its Python client, the default numpy embedder, and the MCP
# server's SDK: the [mcp] extra, 13 small wheels, ~1.3 MB to download, ~9 MB installed);
# `make test` adds the test tools, every optional backend and extra (torch among them: the sentence-transformers
# embedders and the LoRA tuner), the TypeScript client's npm packages, and Debian's Chromium and CJK fonts for the
# browser tests.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
RUN    := $(VENV)/.run-installed
DEV    := $(VENV)/.dev-installed
EXTRAS := dev,torch,train,weaviate,neo4j,s3,elasticsearch,mcp
# llama-cpp-python ships only its sdist: built once (~7 min on 2 cores) into this folder, outside the clone, and
# found there by every later install, so `make test` on a fresh clone of the same machine does not rebuild it
WHEELS ?= $(HOME)/.cache/mneme-wheels

.PHONY: install install-dev run demo test test-fast test-stack bench bench-beliefs bench-recall clean

$(RUN): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ./clients/python -e ".[mcp]"
	touch $(RUN)

$(DEV): $(RUN) clients/typescript/package-lock.json web/memory-page/package-lock.json
	# torch 2.13.0 is the local CPU build (pip's find-links); a looser spec would pull a CUDA build
	$(PY) -m pip install "torch==2.13.0"
	$(PY) -m pip wheel --no-deps --wheel-dir $(WHEELS) --find-links $(WHEELS) "llama-cpp-python==0.3.36"
	$(PY) -m pip install --find-links $(WHEELS) -e "./clients/python[langchain]" -e ".[$(EXTRAS)]"
	npm ci --prefix clients/typescript --no-audit --no-fund
	npm ci --prefix web/memory-page --no-audit --no-fund
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	fc-list -q "Noto Sans CJK SC" || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk)
	touch $(DEV)

install: $(RUN)

install-dev: $(DEV)

run: install
	$(PY) -m workers.local.stack

demo: install
	$(PY) -m workers.local.demo

# lint and strict types, then two lanes: fast (no server), then the tests that need servers. Each lane runs
# on two pytest workers, a test file per worker (a file's tests share its stack and run in order).
LANE = -n 2 --dist loadfile

test: install-dev
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -m "not stack" $(LANE)
	$(PY) -m pytest -m stack $(LANE)

test-fast: install-dev
	$(PY) -m pytest -m "not stack" $(LANE)

test-stack: install-dev
	$(PY) -m pytest -m stack $(LANE)

clean:
	rm -rf $(VENV) var clients/typescript/node_modules clients/typescript/dist

bench: install-dev
	$(PY) -m bench.bench

bench-beliefs: install-dev
	$(PY) -m bench.beliefs_dev

bench-recall: install-dev
	$(PY) -m bench.recall
	$(PY) -m bench.recall_long
	$(PY) -m bench.recall_dev
