"""mqadmin's connection commands (org.apache.rocketmq.tools.command.connection):
consumerConnection and producerConnection, with the clients' versions as MQVersion names them.
"""

from __future__ import annotations

import argparse

from orbitmq.admin.admin_api import MQAdminExt
from orbitmq.admin.output import render_table
from orbitmq.admin.registry import Result, command

# MQVersion.Version: from V4_0_0_SNAPSHOT (ordinal 212) on, every x.y.z has a SNAPSHOT then a
# release entry, up to V5_9_9; HIGHER_VERSION follows.
_V4_0_0_SNAPSHOT = 212


_HIGHER_VERSION = _V4_0_0_SNAPSHOT + 200 * 2


def version_desc(value: int) -> str:
    """MQVersion.getVersionDesc for 4.x and 5.x clients; older ordinals are shown as numbers."""
    if value >= _HIGHER_VERSION:
        return "HIGHER_VERSION"
    if value < _V4_0_0_SNAPSHOT:
        return str(value)
    index, release = divmod(value - _V4_0_0_SNAPSHOT, 2)
    major, rest = divmod(index, 100)
    name = f"V{major + 4}_{rest // 10}_{rest % 10}"
    return name if release else f"{name}_SNAPSHOT"


def _properties_desc(conn: dict) -> str:
    """A gRPC client's Settings.client_properties as k=v pairs, sorted by key ("" when none)."""
    props = conn.get("clientProperties") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(props.items()))


def _consumer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address")


@command("consumerConnection", "Query consumer's socket connection, client version and subscription.",
         _consumer_connection_options)
async def consumer_connection(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    _addr, cc = await admin.consumer_connection(args.group.strip(), args.broker_addr)
    conns = sorted(cc.get("connectionSet", []), key=lambda c: str(c.get("clientId")))
    # The column appears only when a client declared properties, so mqadmin's layout stays otherwise.
    with_props = any(c.get("clientProperties") for c in conns)
    rows = [[c.get("clientId"), c.get("clientAddr"), c.get("language"), version_desc(int(c.get("version") or 0))]
            + ([_properties_desc(c)] if with_props else []) for c in conns]
    subs = [(str(sd.get("topic", topic)), str(sd.get("subString", "")))
            for topic, sd in sorted((cc.get("subscriptionTable") or {}).items())]
    text = "\n".join([
        render_table(["#ClientId", "#ClientAddr", "#Language", "#Version"]
                     + (["#ClientProperties"] if with_props else []), rows), "",
        "Below is subscription:", render_table(["#Topic", "#SubExpression"], subs), "",
        f"ConsumeType: {cc.get('consumeType')}", f"MessageModel: {cc.get('messageModel')}",
        f"ConsumeFromWhere: {cc.get('consumeFromWhere')}"])
    return Result(cc, text)


def _producer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group name")
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("producerConnection", "Query producer's socket connection and client version.",
         _producer_connection_options)
async def producer_connection(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    pc = await admin.producer_connection(args.group.strip(), args.topic.strip())
    conns = sorted(pc["connectionSet"], key=lambda c: str(c.get("clientId")))
    lines = [f"{i:04d}  {str(c.get('clientId')):<32} {str(c.get('clientAddr')):<22} {str(c.get('language')):<8} "
             f"{version_desc(int(c.get('version') or 0))}" + (f"  {_properties_desc(c)}" if c.get("clientProperties") else "")
             for i, c in enumerate(conns, 1)]
    return Result(pc, "\n".join(lines))
