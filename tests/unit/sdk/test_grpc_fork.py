"""A process that imported orbitmq can fork children with a preexec_fn while gRPC calls are in flight.

With gRPC's fork handlers on (its default), a child forked with a preexec_fn while another thread
was inside a gRPC call died of SIGABRT or hung before exec (4 of 300 here). That is how PySpark's JVM
launch failed in CI ("Java gateway process exited before sending its port number") after the SDK
tests had left gRPC threads running. `import orbitmq` turns the handlers off (sdk/__init__.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = r"""
import signal, subprocess, threading, time
from concurrent import futures

import orbitmq  # first, as an application using the SDK or the Spark source does
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

server = grpc.server(futures.ThreadPoolExecutor(8))
health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
stopping = threading.Event()

def unary_calls():
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    while not stopping.is_set():
        stub.Check(health_pb2.HealthCheckRequest())

def open_stream():
    stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    for _ in stub.Watch(health_pb2.HealthCheckRequest()):
        pass

for _ in range(4):
    threading.Thread(target=unary_calls, daemon=True).start()
threading.Thread(target=open_stream, daemon=True).start()
time.sleep(0.5)
killed = []
for _ in range(200):
    child = subprocess.Popen(["/bin/sh", "-c", "cat >/dev/null"], stdin=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    time.sleep(0.005)
    child.stdin.close()
    try:
        if child.wait(timeout=10) != 0:
            killed.append(child.returncode)
    except subprocess.TimeoutExpired:  # stuck between fork and exec
        child.kill()
        child.wait()
        killed.append("hung")
stopping.set()
import os
print("killed", killed, "fork support", os.environ.get("GRPC_ENABLE_FORK_SUPPORT"), flush=True)
os._exit(0)
"""


def test_children_forked_during_grpc_calls_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    run = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "killed [] fork support false" in run.stdout, run.stdout + run.stderr[-3000:]


def test_a_value_the_user_chose_is_kept() -> None:
    env = dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="true")
    run = subprocess.run([sys.executable, "-c", "import orbitmq, os; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "true", run.stderr
