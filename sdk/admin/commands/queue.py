"""mqadmin's queue command (org.apache.rocketmq.tools.command.queue): queryCq, a ConsumeQueue's
entries as QueryConsumeQueueCommand prints them.
"""

from __future__ import annotations

import argparse
import json

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.registry import Result, UsageError, command


def _query_cq_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-q", "--queue", dest="queue_id", type=int, required=True, help="queue num, ie. 1")
    p.add_argument("-i", "--index", type=int, required=True, help="start queue index.")
    p.add_argument("-c", "--count", type=int, default=10, help="how many.")
    p.add_argument("-b", "--broker", help="broker addr.")
    p.add_argument("-g", "--consumer", dest="group", help="consumer group.")


@command("queryCq", "Query cq command.", _query_cq_options)
async def query_cq(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """ConsumeQueue entries (physical offset, size, tags hash; with the ConsumeQueue extension the
    unit, its bit map and the group filter's verdict) of one queue, from -i on, as
    ConsumeQueueData#toString prints them."""
    topic = args.topic.strip()
    if args.count <= 0:
        raise UsageError(f"-c count must be positive, not {args.count}")
    addr = (args.broker or "").strip()
    if not addr:
        masters = admin.route_masters(await admin.topic_route(topic))
        if not masters:
            raise AdminError(f"No topic route data! (topic {topic} has no master online)")
        addr = masters[0][1]
    body, remark = await admin.query_consume_queue(addr, topic, args.queue_id, args.index, args.count,
                                                   (args.group or "").strip() or None)
    out = []
    if body.get("subscriptionData") is not None:
        out += ["Subscription data: ", json.dumps(body["subscriptionData"], indent="\t"), _LINE]
    if body.get("filterData") is not None:
        out += ["Filter data: ", str(body["filterData"]), _LINE]
    out += ["Queue data: ", f"max: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}", _LINE]
    for i, entry in enumerate(body.get("queueData") or [], args.index):
        fields = (f"physicOffset={entry.get('physicOffset')}, physicSize={entry.get('physicSize')}, "
                  f"tagsCode={entry.get('tagsCode')}, extendDataJson='{_java(entry.get('extendDataJson'))}', "
                  f"bitMap='{_java(entry.get('bitMap'))}', eval={str(bool(entry.get('eval'))).lower()}, "
                  f"msg='{_java(entry.get('msg'))}'")
        out += [f"idx: {i}", "ConsumeQueueData{" + fields + "}", _LINE]
    if remark:
        out.append(remark)
    return Result({**body, "brokerAddr": addr, "remark": remark}, "\n".join(out))


_LINE = "======================================"


def _java(value: object) -> str:
    """A field as Java's string concatenation prints it (null for None)."""
    return "null" if value is None else str(value)
