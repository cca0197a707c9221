# OrbitMQ container image: one image for every component; the sub-command picks the role
# (`orbitmq namesrv`, `orbitmq controller -c controller.conf`, `orbitmq broker -c broker.conf`,
# `orbitmq proxy -n …`). deploy/k8s runs every pod from it.
#
#   docker build -t orbitmq:0.1.0 .
#   docker run --rm orbitmq:0.1.0 namesrv
#
# Two stages so grpcio-tools (protoc, ~10 MB of native code) is only needed to generate the
# gRPC bindings into sdk/proto and never ships in the runtime image.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# The generator runs on the stage's own interpreter; OrbitMQ goes into a separate venv that is
# the only thing copied out, so grpcio-tools and the C compiler stay behind. The compiler builds
# the optional Cython accelerators (setup.py; without it the install falls back to pure Python).
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && pip install "grpcio-tools>=1.85.1" \
    && python -m venv /opt/orbitmq
WORKDIR /src
COPY . .
RUN python proto/generate.py \
    && /opt/orbitmq/bin/pip install . \
    && /opt/orbitmq/bin/orbitmq --version

FROM ${PYTHON_IMAGE}
ARG ORBITMQ_UID=10001
LABEL org.opencontainers.image.title="OrbitMQ" \
      org.opencontainers.image.description="A RocketMQ 5-compatible messaging cluster in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed numeric uid/gid so Kubernetes can check runAsNonRoot and fsGroup can own the broker's
# volume. The home holds the defaults RocketMQ derives from it: ~/store, ~/namesrv/kvConfig.json.
RUN groupadd --system --gid "${ORBITMQ_UID}" orbitmq \
    && useradd --system --uid "${ORBITMQ_UID}" --gid orbitmq --home-dir /home/orbitmq \
       --create-home --shell /usr/sbin/nologin orbitmq \
    && install -d -o orbitmq -g orbitmq /home/orbitmq/store /home/orbitmq/namesrv
COPY --from=build /opt/orbitmq /opt/orbitmq
# HOME explicitly: a numeric USER has no passwd lookup in every runtime, and the services derive
# their default paths (~/store, ~/namesrv, ~/DLedgerController) from it.
ENV PATH=/opt/orbitmq/bin:${PATH} \
    HOME=/home/orbitmq \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER ${ORBITMQ_UID}:${ORBITMQ_UID}
WORKDIR /home/orbitmq
# NameServer, Controller Raft and Remoting, Broker remoting and HA, Proxy gRPC, Prometheus
# /metrics (RocketMQ's default ports: docs/architecture.md, "Ports").
EXPOSE 9876 9877 9878 10911 10912 8080 8081 5557
ENTRYPOINT ["orbitmq"]
CMD ["--help"]
