# OrbitMQ — every target sets itself up: a fresh clone needs only Python 3.11 and make.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard proto/apache/rocketmq/v2/*.proto)
PROTO_STAMP := sdk/proto/.generated

.PHONY: setup run test proto lint bench bench-store clean node

$(STAMP): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

$(PROTO_STAMP): $(PROTO_SRC) proto/generate.py $(STAMP)
	$(BIN)/python proto/generate.py
	touch $@

setup: $(STAMP) $(PROTO_STAMP)

# The official RocketMQ 5 Node.js client for the interop tests, pinned by its lockfile.
NODE_DIR := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	touch $@

node: $(NODE_STAMP)

proto: $(STAMP)
	$(BIN)/python proto/generate.py
	touch $(PROTO_STAMP)

run: setup
	$(BIN)/orbitmq local

test: setup node
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/orbitmq bench all

bench-store: setup
	$(BIN)/orbitmq bench store

clean:
	rm -rf $(VENV) sdk/proto build *.egg-info
