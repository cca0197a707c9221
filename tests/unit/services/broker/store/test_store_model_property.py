"""Property test: whatever mix of puts and batches, on whatever small segment sizes, every queue
reads back exactly what was put, in order, before and after a (clean or crash) restart."""

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message_codec import decode_record

put = st.tuples(st.integers(0, 2), st.integers(0, 700))  # (queue, body size)
op = st.one_of(put.map(lambda p: [p]), st.lists(put, min_size=2, max_size=6))


def read_queue(s: MessageStore, qid: int) -> list[bytes]:
    out, offset = [], 0
    while True:
        r = s.get_message("g", "P", qid, offset)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out += [decode_record(b).body for b in r.message_buffer_list]
        offset = r.next_begin_offset


async def scenario(root: Path, ops: list, cl_size: int, cq_units: int, crash: bool) -> None:
    cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=cl_size,
                             mapped_file_size_consume_queue=20 * cq_units, message_index_enable=False)
    model: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    s = MessageStore(cfg)
    await s.start()
    n = 0
    for batch in ops:
        msgs = []
        for qid, size in batch:
            body = n.to_bytes(4, "big") + bytes([n % 256]) * size
            n += 1
            msgs.append((qid, body))
        inner = [MessageExtBrokerInner(topic="P", queue_id=q, body=b) for q, b in msgs]
        r = await (s.put_message(inner[0]) if len(inner) == 1 else s.put_messages(inner))
        assert r.status is PutMessageStatus.PUT_OK
        for q, b in msgs:
            model[q].append(b)
    for _ in range(100):
        if s.dispatch_behind_bytes() == 0:
            break
        await asyncio.sleep(0.002)
    for q in range(3):
        assert read_queue(s, q) == model[q]
    await s.shutdown()
    if crash:
        (root / "abort").touch()
    s = MessageStore(cfg)
    await s.start()
    try:
        for q in range(3):
            assert read_queue(s, q) == model[q]
            assert s.get_max_offset_in_queue("P", q) == len(model[q])
    finally:
        await s.shutdown()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=25), cl_size=st.sampled_from([1024, 2048, 4096, 9000]),
       cq_units=st.sampled_from([3, 7, 50]), crash=st.booleans())
def test_queues_read_back_what_was_put(ops, cl_size, cq_units, crash):
    root = Path(tempfile.mkdtemp(prefix="orbitmq-store-prop-"))
    try:
        asyncio.run(scenario(root, ops, cl_size, cq_units, crash))
    finally:
        shutil.rmtree(root, ignore_errors=True)
