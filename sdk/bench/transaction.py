"""`orbitmq bench transaction`: what a transactional send costs compared with a normal one.

In one `orbitmq local` (child process, temporary data dir, free ports), the same closed-loop
load of single-message SendMessage requests is run against a NORMAL topic, then against a
TRANSACTION topic where every send is followed by EndTransaction(COMMIT) (half message, commit
message and op: three CommitLog writes instead of one). Prints both rates and their ratio;
never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence

import grpc

from orbitmq.bench.load import CHANNEL_OPTIONS, LoadOptions, client_metadata, run_send_load
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.scenario import stop_local
from orbitmq.bench.stats import Stats, format_summary
from orbitmq.client import MQClientAPI
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.net import free_ports
from orbitmq.common.topic_config import TopicConfig
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc

NORMAL_TOPIC = "OrbitTxBenchNormal"
TRANSACTION_TOPIC = "OrbitTxBenchTransaction"
OK = pb.Code.OK


def start_local(data_dir: str) -> tuple[subprocess.Popen, str, str]:
    """`orbitmq local` in a child process; (process, proxy endpoint, broker address) once ready."""
    ports = free_ports(3)
    proc = launch_local(data_dir, local_ports_args(*ports))
    return proc, f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[1]}"


async def create_topics(broker: str) -> None:
    api = MQClientAPI(timeout=10)
    try:
        await api.create_topic(broker, TopicConfig(NORMAL_TOPIC, 4, 4, attributes={"message.type": "NORMAL"}))
        await api.create_topic(broker, TopicConfig(TRANSACTION_TOPIC, 4, 4,
                                                   attributes={"message.type": "TRANSACTION"}))
    finally:
        await api.close()


async def run_transaction_load(endpoint: str, size: int, concurrency: int, duration: float) -> Stats:
    """Send a half message and commit it, ``concurrency`` loops for ``duration`` seconds; RT is
    measured from the send to the commit's answer."""
    stats = Stats()
    body = os.urandom(size)
    metadata = client_metadata("bench-transaction")
    async with grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        loop = asyncio.get_running_loop()

        async def one() -> str | None:
            sysp = pb.SystemProperties(message_id=create_uniq_id(), tag="bench", message_type=pb.MessageType.TRANSACTION,
                                       body_encoding=pb.Encoding.IDENTITY)
            message = pb.Message(topic=pb.Resource(name=TRANSACTION_TOPIC), body=body, system_properties=sysp)
            sent = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=metadata, timeout=10)
            if sent.status.code != OK:
                return f"send {pb.Code.Name(sent.status.code)}: {sent.status.message}"
            ended = await stub.EndTransaction(spb.EndTransactionRequest(
                topic=pb.Resource(name=TRANSACTION_TOPIC), message_id=sysp.message_id,
                transaction_id=sent.entries[0].transaction_id, resolution=pb.TransactionResolution.COMMIT,
                source=pb.TransactionSource.SOURCE_CLIENT), metadata=metadata, timeout=10)
            if ended.status.code != OK:
                return f"commit {pb.Code.Name(ended.status.code)}: {ended.status.message}"
            return None

        warm = await one()
        if warm is not None:
            raise RuntimeError(f"transactional send to {TRANSACTION_TOPIC} failed: {warm}")

        async def worker() -> None:
            while loop.time() < end:
                t0 = time.perf_counter()
                try:
                    failure = await one()
                except grpc.aio.AioRpcError as exc:
                    failure = f"gRPC {exc.code().name}: {exc.details()}"
                stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
                stats.requests += 1
                if failure is None:
                    stats.messages += 1
                else:
                    stats.add_error(failure)

        start = loop.time()
        end = start + duration
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        stats.elapsed_s = loop.time() - start
    return stats


async def run(size: int, concurrency: int, duration: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-transaction-") as data_dir:
        proc, endpoint, broker = start_local(data_dir)
        try:
            await create_topics(broker)
            await asyncio.sleep(1.0)  # the NameServer learns the new topics
            normal_opts = LoadOptions(endpoint=endpoint, topic=NORMAL_TOPIC, size=size, concurrency=concurrency,
                                      duration=duration)
            await run_send_load(LoadOptions(endpoint=endpoint, topic=NORMAL_TOPIC, size=size, concurrency=1,
                                            duration=1.0))
            normal = (await run_send_load(normal_opts)).summary()
            print(format_summary("normal sends", normal), flush=True)
            transactional = (await run_transaction_load(endpoint, size, concurrency, duration)).summary()
            print(format_summary("transactional send + commit", transactional), flush=True)
        finally:
            stop_local(proc)
    ratio = transactional["tps"] / normal["tps"] if normal["tps"] else None
    return {"normal": normal, "transactional": transactional, "ratio": ratio}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench transaction", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-s", "--size", type=int, default=1024, help="message body size in bytes")
    parser.add_argument("-w", "--concurrency", type=int, default=16, help="sends (or send+commit) in flight")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv or []))
    summary = asyncio.run(run(args.size, args.concurrency, args.duration))
    if args.json:
        print(json.dumps(summary))
    elif summary["ratio"] is not None:
        print(f"transaction: transactional messages/s are {summary['ratio']:.2f} x normal sends/s "
              f"({summary['transactional']['tps']:.0f} vs {summary['normal']['tps']:.0f} msgs/s)")
    return 0
