# OrbitMQ — every target sets itself up: a fresh clone needs only Python 3.11 and make.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard proto/apache/rocketmq/v2/*.proto)
PROTO_STAMP := sdk/proto/.generated

.PHONY: setup run test proto lint bench bench-store clean node tools fuzz

SPEEDUPS := $(shell find sdk services -name '_speedups*.pyx' -o -name '_speedups*.pxi' 2>/dev/null)

# The accelerators (setup.py) need a C compiler and Python's headers: installed when missing.
$(STAMP): pyproject.toml setup.py $(SPEEDUPS)
	@command -v cc >/dev/null || command -v gcc >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev)
	@$(PY) -c "import os, sysconfig; os.stat(sysconfig.get_paths()['include'] + '/Python.h')" 2>/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			python3-dev "python$$($(PY) -c 'import sys; print(*sys.version_info[:2], sep=".")')-dev")
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	ORBITMQ_REQUIRE_SPEEDUPS=1 $(BIN)/python -m pip install -q -e '.[dev,spark]'
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

# The partition chaos tests put replicas in network namespaces with `ip` (iproute2); the TLS tests
# make certificates with `openssl`.
tools:
	@command -v ip >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2)
	@command -v openssl >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl)

# Two passes: the tests that mostly wait (long polls, timers, subprocesses; the mqadmin CLI tests of
# tests/admin run a process per command) on two workers, then
# the timing-sensitive ones (crashes, partitions, k8s boots, Spark, and those marked `serial`) one
# at a time. Every pass runs; the target fails if any did.
PARALLEL_TESTS := tests/unit tests/fuzz tests/sdk tests/interop tests/admin
test: setup node tools
	@status=0; \
	$(BIN)/python -m pytest -q -n 2 -m "not serial" $(PARALLEL_TESTS) || status=$$?; \
	$(BIN)/python -m pytest -q -m serial $(PARALLEL_TESTS) || status=$$?; \
	$(BIN)/python -m pytest -q $(addprefix --ignore=,$(PARALLEL_TESTS)) || status=$$?; \
	exit $$status

lint: setup
	$(BIN)/ruff check .

bench: setup
	@command -v nats-server >/dev/null || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server) || \
		echo "nats-server not installed: bench all skips NATS"
	@$(BIN)/python -c "import nats" 2>/dev/null || $(BIN)/python -m pip install -q -e '.[bench]' || \
		echo "nats-py not installed: bench all skips NATS"
	$(BIN)/orbitmq bench all

# Coverage-guided fuzzing (atheris) of every decoder that reads outside bytes, FUZZ_SECONDS each;
# a crash stops the run and is left as crash-<sha1> in $(FUZZ_WORKDIR)/<harness>/ (tests/fuzz/run.py).
FUZZ_SECONDS ?= 60
FUZZ_WORKDIR ?= /tmp/orbitmq-fuzz
fuzz: setup
	@for t in $$($(BIN)/python -m tests.fuzz.run --list); do \
		echo "== fuzz $$t for $(FUZZ_SECONDS)s"; \
		FUZZ_WORKDIR=$(FUZZ_WORKDIR)/$$t $(BIN)/python -m tests.fuzz.run $$t -max_total_time=$(FUZZ_SECONDS) \
			-print_final_stats=1 || exit 1; \
	done

bench-store: setup
	$(BIN)/orbitmq bench store

clean:
	rm -rf $(VENV) sdk/proto build *.egg-info
	find sdk services \( -name '_speedups*.c' -o -name '_speedups*.so' \) -delete
