"""batch_ack_points (handles the proxy already decoded) sends the body batch_ack built from raw strings."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from orbitmq.client.api import MQClientAPI, _encode_bitset
from orbitmq.common import extra_info as ei
from orbitmq.common.route import dump_json
from orbitmq.proxy.receipt_handle import ReceiptHandle
from orbitmq.remoting.codes import ResponseCode


def reference_body(broker_name: str, group: str, topic: str, extra_infos: list[str]) -> bytes:
    """The BATCH_ACK_MESSAGE body as batch_ack built it before batch_ack_points existed."""
    merged: dict[str, dict[str, Any]] = {}
    for info in extra_infos:
        ck = ei.parse_extra_info(info)
        key = f"{ck.retry}@{ck.queue_id}@{ck.ck_queue_offset}@{ck.pop_time}"
        entry = merged.setdefault(key, {"c": group, "t": topic, "r": ck.retry, "so": ck.ck_queue_offset,
                                        "q": ck.queue_id, "rq": ck.revive_qid, "pt": ck.pop_time,
                                        "it": ck.invisible_time, "bits": set()})
        entry["bits"].add(ck.msg_queue_offset - ck.ck_queue_offset)
    acks = []
    for entry in merged.values():
        bits = entry.pop("bits")
        entry["b"] = _encode_bitset(sorted(bits))
        acks.append(entry)
    return dump_json({"brokerName": broker_name, "acks": acks})


class _Response:
    code = ResponseCode.SUCCESS
    remark = None


class _Capture(MQClientAPI):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def invoke(self, addr, code, header=None, body=None, timeout=None):  # type: ignore[override]  # noqa: ASYNC109
        self.bodies.append(body)
        return _Response()


def _handles(rng: random.Random) -> list[str]:
    out = []
    for _ in range(rng.randint(1, 40)):
        start = rng.choice([0, 10, 100])
        out.append(" ".join(map(str, (start, rng.choice([1763769600000, 1763769600001]), 60000, rng.choice([0, 3]),
                                      rng.choice("012"), "broker-a", rng.choice([0, 1, 2]),
                                      start + rng.randint(0, 70), rng.randint(0, 10**9)))))
    return out


def test_points_body_equals_raw_body() -> None:
    rng = random.Random(8)
    api = _Capture()

    async def run() -> None:
        for _ in range(300):
            raws = _handles(rng)
            handles = [ReceiptHandle.decode(r) for r in raws]
            points = [(hd.topic_type, hd.queue_id, hd.start_offset, hd.retrieve_time, hd.revive_queue_id,
                       hd.invisible_time, hd.offset) for hd in handles]
            await api.batch_ack_points("addr", "broker-a", "G", "T", points)
            await api.batch_ack("addr", "broker-a", "G", "T", raws)
            expected = reference_body("broker-a", "G", "T", raws)
            assert api.bodies[-2] == expected
            assert api.bodies[-1] == expected

    asyncio.run(run())
