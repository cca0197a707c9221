# OrbitMQ — every target sets itself up: a fresh clone needs only Python 3.11 and make.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard proto/apache/rocketmq/v2/*.proto)
PROTO_STAMP := sdk/proto/.generated

.PHONY: setup run test test-unit proto lint bench bench-store clean node tools fuzz clients java-clients go-clients apache kafka compat

SPEEDUPS := $(shell find core sdk services -name '_speedups*.pyx' -o -name '_speedups*.pxi' 2>/dev/null)

# The accelerators (setup.py) need a C compiler and Python's headers: installed when missing.
$(STAMP): pyproject.toml setup.py $(SPEEDUPS)
	@command -v cc >/dev/null || command -v gcc >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev)
	@$(PY) -c "import os, sysconfig; os.stat(sysconfig.get_paths()['include'] + '/Python.h')" 2>/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			python3-dev "python$$($(PY) -c 'import sys; print(*sys.version_info[:2], sep=".")')-dev")
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	ORBITMQ_REQUIRE_SPEEDUPS=1 $(BIN)/python -m pip install -q -e '.[dev,spark,bench]'
	touch $@

$(PROTO_STAMP): $(PROTO_SRC) proto/generate.py $(STAMP)
	$(BIN)/python proto/generate.py
	touch $@

# The package as one folder of links (scripts/link_tree.py) on the venv's path, so that static
# tools (pyright, jedi) follow `orbitmq.remoting.X` to core/remoting; redone when a root's
# top-level entries change (a folder's mtime) or setup.py's table does.
LINK_TREE := $(VENV)/orbitmq-links
LINK_STAMP := $(LINK_TREE)/.linked

$(LINK_STAMP): setup.py scripts/link_tree.py $(PROTO_STAMP) core sdk services
	$(BIN)/python scripts/link_tree.py $(LINK_TREE)
	touch $@

setup: $(STAMP) $(PROTO_STAMP) $(LINK_STAMP)

# The official RocketMQ 5 Node.js client for the interop tests, pinned by its lockfile.
NODE_DIR := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	touch $@

node: $(NODE_STAMP)

# The Java and Go clients of the interop tests (tests/interop/java/<suite>, tests/interop/go/<suite>),
# each pinned by exact version (a pom.xml; a go.mod with its committed go.sum) and fetched into
# ignored caches: Maven's repository in .cache/m2, Go's modules and build cache in .cache/go. A suite's classes
# and classpath land in its target/, a Go suite's binary in .cache/go/bin/<suite>
# (tests/support/jvm.py and golang.py read them). Maven and Go are installed when missing.
CACHE := $(CURDIR)/.cache
# Apache RocketMQ's own servers (tests/compat/apache/pom.xml, read by tests/support/apache.py): a
# suite like the clients' (classpath in its target/), fetched with them; `make apache` fetches it alone.
APACHE_POM := tests/compat/apache/pom.xml
# Apache Kafka's broker and Spark's Kafka connector, `orbitmq bench spark`'s peer (read by
# sdk/bench/kafka_kraft.py): two suites, so the broker's jars never reach Spark; `make kafka` alone.
KAFKA_POMS := tests/compat/kafka/pom.xml tests/compat/spark-kafka/pom.xml
JAVA_SUITES := $(wildcard tests/interop/java/*/pom.xml) $(APACHE_POM) $(KAFKA_POMS)
GO_SUITES := $(wildcard tests/interop/go/*/go.mod)
MVN := mvn -B -q -Dstyle.color=never -Dmaven.repo.local=$(CACHE)/m2
GO_ENV := GOPATH=$(CACHE)/go GOMODCACHE=$(CACHE)/go/mod GOCACHE=$(CACHE)/go/build GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local

# Maven fetches (network) while Go compiles (CPU): the two run side by side.
clients:
	@$(MAKE) --no-print-directory -j2 java-clients go-clients

java-clients:
	@if [ -n "$(JAVA_SUITES)" ]; then \
		command -v mvn >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven); \
		for pom in $(JAVA_SUITES); do \
			$(MVN) -f $$pom compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt || exit 1; \
		done; \
	fi

apache:
	@$(MAKE) --no-print-directory java-clients JAVA_SUITES=$(APACHE_POM)

kafka:
	@$(MAKE) --no-print-directory java-clients JAVA_SUITES="$(KAFKA_POMS)"

# Differential conformance (tests/compat/conformance): the Remoting corpus to Apache RocketMQ's and
# OrbitMQ's NameServer and broker, then the gRPC corpus to both proxies (grpc_run), each table of
# differences printed; fails on one not recorded (both halves run either way).
compat: setup apache
	@status=0; \
	$(BIN)/python -m tests.compat.conformance.run || status=1; \
	$(BIN)/python -m tests.compat.conformance.grpc_run || status=1; \
	exit $$status

go-clients:
	@if [ -n "$(GO_SUITES)" ]; then \
		command -v go >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang); \
		for mod in $(GO_SUITES); do \
			dir=$$(dirname $$mod); \
			(cd $$dir && $(GO_ENV) go build -o $(CACHE)/go/bin/$$(basename $$dir) .) || exit 1; \
		done; \
	fi

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

# Four passes: the tests that mostly wait (long polls, timers, subprocesses, the clusters of
# tests/integration; the mqadmin CLI tests of tests/admin run a process per command) on three
# workers, more than the two cores since they wait more than they compute (13 min against 15-18 on
# two), each module whole on one worker (`--dist loadfile`: with `loadgroup` the tests of a module
# spread over the workers and each worker started the module's cluster, its JVMs too, again);
# those of them marked `serial` one at a time; the unit tests of the servers and the core (where
# the compiled twins are), the SDK tests and one official client's send/receive again, on two
# workers, with ORBITMQ_NO_SPEEDUPS=1: the pure-Python code an install without a C compiler runs
# (orbitmq.common.speedups; not the Remoting client's tests: that client has no compiled twin, and
# tests/unit/core checks its codecs in that mode); then the timing-sensitive rest (crashes,
# partitions, k8s boots, Spark, tests/compat's Apache RocketMQ JVMs beside OrbitMQ) on two workers,
# each module whole on one (`--dist loadfile`: its clusters and JVMs start once; 16 min against
# 20 one at a time), printing the slowest so the next cut is visible in CI's log.
# An integration test whose assertions are about time (a delay not delivered early) is marked
# `serial`. Every pass runs; the target fails if any did.
PARALLEL_TESTS := tests/unit tests/fuzz tests/sdk tests/interop tests/admin tests/integration
NO_SPEEDUPS_TESTS := tests/unit/core tests/unit/services tests/unit/test_speedups.py tests/unit/test_fuzz_findings.py \
	tests/sdk tests/interop/test_python_simple_consumer.py::test_receive_and_ack_round_trip
test: setup node tools clients
	@status=0; \
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --durations=15 -m "not serial" $(PARALLEL_TESTS) \
		|| status=$$?; \
	$(BIN)/python -m pytest -q -m serial $(PARALLEL_TESTS) || status=$$?; \
	ORBITMQ_NO_SPEEDUPS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not serial" $(NO_SPEEDUPS_TESTS) \
		--ignore=tests/sdk/remoting_client || status=$$?; \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 $(addprefix --ignore=,$(PARALLEL_TESTS)) \
		|| status=$$?; \
	exit $$status

# The edit-test loop: tests/unit alone, on two workers. It needs the venv (`setup`) but not
# `make node` or `make tools` (no Node.js, iproute2 or openssl), and runs no Spark, Java, interop,
# integration or chaos test; `make test` runs the whole suite.
test-unit: setup
	$(BIN)/python -m pytest -q -n 2 tests/unit

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
	find core sdk services \( -name '_speedups*.c' -o -name '_speedups*.so' \) -delete
