"""One instance of a subscribed PullConsumer group, run as a process by test_pull_consumer_group.py.

It polls, commits after every ``--commit-every`` polls that returned messages, and writes what it did as JSON lines (line-buffered, so a
kill -9 loses nothing written): its share when it changes ("assign"), each message ("poll"), and
the positions it committed ("commit"; a lower bound of what the group holds for those queues).
SIGTERM leaves the group gracefully (AsyncPullConsumer.shutdown commits before terminating).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import TextIO

from orbitmq import AsyncPullConsumer, ClientConfig
from orbitmq.consumer import pull


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--endpoints", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--refresh", type=float, default=pull.ASSIGNMENT_REFRESH_S)
    p.add_argument("--commit-every", type=int, default=1)
    args = p.parse_args()
    pull.ASSIGNMENT_REFRESH_S = args.refresh
    with open(args.out, "a", buffering=1) as out:
        asyncio.run(run(args, out))


async def run(args: argparse.Namespace, out: TextIO) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    def log(**record: object) -> None:
        out.write(json.dumps(record) + "\n")

    async with AsyncPullConsumer(ClientConfig(args.endpoints), args.group, long_polling_timeout=1) as consumer:
        await consumer.subscribe(args.topic)
        last: list[str] | None = None
        batches = 0
        while not stop.is_set():
            share = sorted(f"{mq.broker}/{mq.queue_id}" for mq in consumer.assignment())
            if share != last:
                log(kind="assign", queues=share)
                last = share
            messages = await consumer.poll(0.5)
            for m in messages:
                log(kind="poll", q=f"{m.broker}/{m.queue_id}", offset=m.queue_offset, body=m.body.decode())
            batches += bool(messages)
            if messages and batches % args.commit_every == 0:
                held = {mq: await consumer.position(mq) for mq in consumer.assignment()}
                await consumer.commit()
                log(kind="commit", offsets={f"{mq.broker}/{mq.queue_id}": o for mq, o in held.items()})
    log(kind="bye")


if __name__ == "__main__":
    main()
