# Two commands on a fresh machine: `make run` and `make test`. Everything installs into .venv.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run demo test test-fast test-stack bench bench-recall clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# torch 2.13.0 is the local CPU build (pip's find-links); a looser spec would pull a CUDA build
	$(PY) -m pip install "torch==2.13.0"
	$(PY) -m pip install -e ./clients/python
	$(PY) -m pip install -e ".[dev,train,weaviate,neo4j,s3,elasticsearch,mcp]"
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m workers.local.stack

demo: install
	$(PY) -m workers.local.demo

# lint and strict types, then two lanes: fast (no server), then the tests that need servers. Each lane runs
# on two pytest workers, a test file per worker (a file's tests share its stack and run in order).
LANE = -n 2 --dist loadfile

test: install
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -m "not stack" $(LANE)
	$(PY) -m pytest -m stack $(LANE)

test-fast: install
	$(PY) -m pytest -m "not stack" $(LANE)

test-stack: install
	$(PY) -m pytest -m stack $(LANE)

clean:
	rm -rf $(VENV) var

bench: install
	$(PY) -m bench.bench

bench-recall: install
	$(PY) -m bench.recall
	$(PY) -m bench.recall_long
