"""`orbitmq bench baseline`: the same SendMessage load against a bare grpc.aio echo server.

The server answers each request with one OK entry per message and does nothing else, so its
throughput is the ceiling of gRPC + protobuf in Python on this machine; the proxy's figure is
reported as a ratio of it. The server runs in its own process, like the proxy does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Sequence

import grpc

from orbitmq.bench.load import CHANNEL_OPTIONS, add_load_arguments, options_from, run_send_load
from orbitmq.bench.stats import format_summary
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc


class EchoService(sgrpc.MessagingServiceServicer):
    async def SendMessage(self, request, context):
        ok = pb.Status(code=pb.Code.OK, message="OK")
        entries = [spb.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=i)
                   for i, m in enumerate(request.messages)]
        return spb.SendMessageResponse(status=ok, entries=entries)


async def serve(port: int) -> None:
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    sgrpc.add_MessagingServiceServicer_to_server(EchoService(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"baseline echo server on 127.0.0.1:{bound}", flush=True)
    await server.wait_for_termination()


def start_server_process() -> tuple[subprocess.Popen, str]:
    """Run the echo server in a child process; returns (process, endpoint)."""
    proc = subprocess.Popen([sys.executable, "-m", "orbitmq", "bench", "baseline", "--serve", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "baseline echo server on" not in line:
        proc.kill()
        raise RuntimeError("baseline echo server did not start")
    return proc, line.rsplit(" ", 1)[1].strip()


def stop_server_process(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_baseline(args) -> dict[str, float]:
    proc, endpoint = start_server_process()
    try:
        time.sleep(0.2)
        opts = options_from(args)
        opts.endpoint = endpoint
        return asyncio.run(run_send_load(opts)).summary()
    finally:
        stop_server_process(proc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench baseline", description=__doc__)
    add_load_arguments(parser)
    parser.add_argument("--serve", type=int, metavar="PORT", help="only run the echo server (0 = any port)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    if args.serve is not None:
        try:
            asyncio.run(serve(args.serve))
        except KeyboardInterrupt:
            pass
        return 0
    summary = run_baseline(args)
    print(json.dumps(summary) if args.json else format_summary(
        f"baseline (bare grpc.aio echo) size={args.size} batch={args.batch} concurrency={args.concurrency}", summary))
    return 0
