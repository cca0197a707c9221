"""`orbitmq bench auth`: what ACL 2.0 costs the send path (issue 16's goal: on ≥ 90 % of off).

In one run, the same send load against `orbitmq local` without and with
``authenticationEnabled`` + ``authorizationEnabled``, alternating off/on for ``--rounds`` rounds
(each a fresh cluster in a child process). With ACL on, a Normal user holding ``Pub`` on the
bench topic sends, so the proxy authenticates and authorizes every call and signs its own broker
calls, which the broker verifies. The client signs in both runs (as an official client with
credentials does), so the difference is the servers'. Prints each run, the medians, their ratio
and the servers' CPU per message; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
from collections.abc import Sequence

from orbitmq.auth.client import install_signing
from orbitmq.bench.load import LoadOptions, add_comparison_arguments
from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.metrics import compare_off_on, measure_send
from orbitmq.bench.off_on import print_off_on
from orbitmq.bench.scenario import stop_local
from orbitmq.client import MQClientAPI
from orbitmq.common.net import free_ports
from orbitmq.remoting.codes import RequestCode, ResponseCode

TOPIC = "OrbitAuthBench"
ADMIN = ("benchadmin", "benchadmin-secret")
INNER = ("benchinner", "benchinner-secret")
USER = ("benchuser", "benchuser-secret")


def start_local(data_dir: str, acl: bool) -> tuple[subprocess.Popen, str, str]:
    """(process, proxy endpoint, broker address) of an `orbitmq local` with ACL 2.0 on or off."""
    ports = free_ports(3)
    keys = [] if not acl else [
        "authenticationEnabled=true", "authorizationEnabled=true",
        "initAuthenticationUser=" + json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
        "innerClientAuthenticationCredentials=" + json.dumps({"accessKey": INNER[0], "secretKey": INNER[1]})]
    proc = launch_local(data_dir, [*local_ports_args(*ports), *keys])
    return proc, f"127.0.0.1:{ports[2]}", f"127.0.0.1:{ports[1]}"


async def grant_bench_user(broker: str) -> None:
    """The Normal user that sends, with Pub (and Create, for the topic's first use) on the topic."""
    api = MQClientAPI(timeout=10)
    install_signing(api.remoting, ADMIN)
    try:
        for code, header, body in (
                (RequestCode.AUTH_CREATE_USER, {"username": USER[0]},
                 {"username": USER[0], "password": USER[1], "userType": "Normal"}),
                (RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{USER[0]}"},
                 {"subject": f"User:{USER[0]}", "policies": [{"policyType": "Custom", "entries": [
                     {"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Create"], "decision": "Allow"}]}]})):
            response = await api.invoke(broker, code, header, json.dumps(body).encode())
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"auth admin request {code} failed: {response.code} {response.remark}")
    finally:
        await api.close()


async def run(opts: LoadOptions, rounds: int) -> dict:
    async def measure(label: str) -> dict:
        with tempfile.TemporaryDirectory(prefix="orbitmq-bench-auth-") as data_dir:
            proc, endpoint, broker = start_local(data_dir, acl=label == "on")
            try:
                if label == "on":
                    await grant_bench_user(broker)
                return await measure_send(proc.pid, endpoint, opts, None, 0.0)
            finally:
                stop_local(proc)

    return await compare_off_on(rounds, "ACL", measure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench auth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_comparison_arguments(parser, concurrency=32, duration=8.0, rounds_help="off/on pairs")
    args = parser.parse_args(list(argv or []))
    opts = LoadOptions(topic=TOPIC, size=args.size, concurrency=args.concurrency, batch=args.batch,
                       duration=args.duration, credentials=USER)
    summary = asyncio.run(run(opts, max(args.rounds, 1)))
    if args.json:
        print(json.dumps(summary))
    else:
        print_off_on("auth", "ACL 2.0", summary)
    return 0
