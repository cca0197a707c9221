"""Crash safety of the store: SIGKILLed SYNC_FLUSH writers, torn and corrupted tails.

Every iteration is a real process kill and a real restart: a writer subprocess appends
messages and records each id in an ack file only after put returned PUT_OK; it is killed at a
random moment (sometimes while it is still recovering), and the store is then reopened here
and checked: every acknowledged message is present and intact, ConsumeQueues and CommitLog
agree in both directions, and appends continue at the right offsets.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message_codec import decode_record

TOPIC = "CrashTopic"
QUEUES = 4
CL_SIZE = 16 * 1024
CQ_SIZE = 20 * 40

WRITER = r"""
import asyncio, os, sys, random
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus

root, ack_path, first_id, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
index = sys.argv[5] == "1"
TOPIC, QUEUES = "CrashTopic", 4

def body_of(i):
    n = 20 + (i * 7919) % 900
    return f"{i:09d}|".encode() + bytes(((i + k) % 251 for k in range(n)))

def make(i):
    return MessageExtBrokerInner(topic=TOPIC, queue_id=i % QUEUES, body=body_of(i),
                                 properties={"KEYS": str(i), "TAGS": "t%d" % (i % 3)},
                                 born_timestamp=1, born_host=("127.0.0.1", 1234))

async def main():
    cfg = MessageStoreConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH",
                             mapped_file_size_commit_log=__CL__, mapped_file_size_consume_queue=__CQ__,
                             message_index_enable=index, max_hash_slot_num=64, max_index_num=256,
                             flush_interval_consume_queue=20,
                             flush_consume_queue_thorough_interval=100)
    store = MessageStore(cfg)
    await store.start()
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(1, b"ready\n")
    rnd = random.Random(seed)
    next_id = [first_id]

    async def writer():
        while True:
            n = rnd.choice((1, 1, 1, 3))
            ids = list(range(next_id[0], next_id[0] + n))
            next_id[0] += n
            if n == 1:
                r = await store.put_message(make(ids[0]))
            else:
                r = await store.put_messages([make(i) for i in ids])
            if r.status is PutMessageStatus.PUT_OK:
                os.write(ack, "".join("%d\n" % i for i in ids).encode())

    await asyncio.gather(*(writer() for _ in range(4)))

asyncio.run(main())
""".replace("__CL__", str(CL_SIZE)).replace("__CQ__", str(CQ_SIZE))


def body_of(i: int) -> bytes:
    n = 20 + (i * 7919) % 900
    return f"{i:09d}|".encode() + bytes((i + k) % 251 for k in range(n))


def make_config(root: Path, **kw) -> MessageStoreConfig:
    base = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=CL_SIZE,
                mapped_file_size_consume_queue=CQ_SIZE, message_index_enable=False,
                max_hash_slot_num=64, max_index_num=256)
    base.update(kw)
    return MessageStoreConfig(**base)


def read_acks(path: Path) -> set[int]:
    if not path.exists():
        return set()
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    return {int(x) for x in complete.split()}


async def verify_store(root: Path, acked: set[int], index: bool = False) -> int:
    """Reopen the store, check it against the acks and the CommitLog; returns the next free id."""
    s = MessageStore(make_config(root, message_index_enable=index))
    await s.start()
    try:
        seen: dict[int, tuple[int, int]] = {}
        cq_phys: set[int] = set()
        for qid in range(QUEUES):
            offset = s.get_min_offset_in_queue(TOPIC, qid)
            offset = max(offset, 0)
            max_off = s.get_max_offset_in_queue(TOPIC, qid)
            while offset < max_off:
                res = s.get_message("g", TOPIC, qid, offset, max_msg_nums=32)
                assert res.status is GetMessageStatus.FOUND, (res.status, offset, max_off)
                for raw, qoff in zip(res.message_buffer_list, res.message_queue_offset, strict=True):
                    m = decode_record(raw, check_crc=True)
                    mid = int(m.body[:9])
                    assert m.topic == TOPIC and m.queue_id == qid and m.queue_offset == qoff
                    assert m.body == body_of(mid), f"message {mid} corrupted"
                    assert mid not in seen, f"message {mid} stored twice"
                    seen[mid] = (qid, qoff)
                    cq_phys.add(m.commit_log_offset)
                offset = res.next_begin_offset
        missing = acked - seen.keys()
        assert not missing, f"acknowledged messages lost: {sorted(missing)[:10]}"
        # Every CommitLog record is in its ConsumeQueue.
        cl = s.commit_log
        cl_phys: set[int] = set()
        for mf in cl.mapped_file_queue.mapped_files:
            pos = 0
            while pos < mf.wrote_position:
                req = cl.check_message_and_return_size(mf.mm, pos, mf.wrote_position, True)
                assert req.success, f"invalid record inside the recovered log at {mf.file_from_offset + pos}"
                if req.msg_size == 0:
                    break
                cl_phys.add(req.commit_log_offset)
                pos += req.msg_size
        assert cl_phys == cq_phys
        if index:
            # The index was rebuilt through the dispatch chain: every stored key is found.
            for mid in sorted(acked)[-50:]:
                hits = s.index_service.query_offset(TOPIC, str(mid), 64, 0, 2**62).phy_offsets
                assert any(int(s.look_message_by_offset(p).body[:9]) == mid for p in hits), f"key {mid} not indexed"
        # Appends continue where each queue ends.
        nxt = max(seen, default=-1) + 1 + 10_000
        for qid in range(QUEUES):
            expect = s.get_max_offset_in_queue(TOPIC, qid)
            r = await s.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=qid, body=body_of(nxt + qid)))
            assert r.status is PutMessageStatus.PUT_OK and r.append_message_result.logics_offset == expect
        return nxt + QUEUES
    finally:
        await s.shutdown()


def run_writer(root: Path, ack: Path, first_id: int, rnd: random.Random, index: bool) -> None:
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(ack), str(first_id), str(rnd.randrange(1 << 30)),
         "1" if index else "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    try:
        if rnd.random() < 0.15:
            time.sleep(rnd.uniform(0.0, 0.12))  # may die during start-up recovery
        else:
            line = proc.stdout.readline()
            assert line == b"ready\n" or proc.poll() is not None
            time.sleep(rnd.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


ROUNDS_PER_STORE = 10  # a fresh store now and then keeps each verification cheap


async def _crash_loop(tmp_path: Path, iterations: int, seed: int, index: bool = False) -> None:
    rnd = random.Random(seed)
    total_acked = 0
    for start in range(0, iterations, ROUNDS_PER_STORE):
        root = tmp_path / f"store{start}"
        ack = tmp_path / f"acks{start}"
        next_id = 0
        for _ in range(min(ROUNDS_PER_STORE, iterations - start)):
            await asyncio.to_thread(run_writer, root, ack, next_id, rnd, index)
            acked = read_acks(ack)
            if acked:
                next_id = max(next_id, max(acked) + 1)
            next_id = max(next_id, await verify_store(root, acked, index))
        total_acked += len(read_acks(ack))
    assert total_acked > iterations  # the writers really did acknowledge work


async def test_sigkill_sync_flush_writer_loses_nothing_a(tmp_path):
    await _crash_loop(tmp_path, 50, seed=1)


async def test_sigkill_sync_flush_writer_loses_nothing_b(tmp_path):
    await _crash_loop(tmp_path, 50, seed=2)


async def test_sigkill_sync_flush_writer_with_index_loses_nothing(tmp_path):
    await _crash_loop(tmp_path, 60, seed=3, index=True)


# --- hand-made damage --------------------------------------------------------------------
async def _fill(root: Path, n: int) -> list[tuple[int, int]]:
    s = MessageStore(make_config(root))
    await s.start()
    out = []
    for i in range(n):
        r = await s.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=0, body=body_of(i)))
        out.append((r.append_message_result.wrote_offset, r.append_message_result.wrote_bytes))
    await s.shutdown()
    return out


def _write_at(root: Path, phy: int, data: bytes) -> None:
    seg = root / "commitlog" / f"{phy - phy % CL_SIZE:020d}"
    with open(seg, "r+b") as f:
        f.seek(phy % CL_SIZE)
        f.write(data)


async def test_torn_tail_is_truncated_and_appends_continue(tmp_path):
    root = tmp_path / "store"
    recs = await _fill(root, 12)
    end = recs[-1][0] + recs[-1][1]
    # A partial record after the end: a plausible header and half a body, then the crash.
    torn = struct.pack(">iI", 500, 0xDAA320A7) + b"\x01" * 120
    _write_at(root, end, torn)
    (root / "abort").touch()
    s = MessageStore(make_config(root))
    await s.start()
    try:
        assert not s.last_exit_ok
        assert s.get_max_phy_offset() == end
        assert s.get_max_offset_in_queue(TOPIC, 0) == 12
        r = await s.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=0, body=b"after"))
        assert r.append_message_result.wrote_offset == end and r.append_message_result.logics_offset == 12
        assert s.look_message_by_offset(end).body == b"after"
    finally:
        await s.shutdown()


async def test_flipped_body_byte_truncates_from_the_bad_record(tmp_path):
    root = tmp_path / "store"
    recs = await _fill(root, 30)
    bad_off, _ = recs[17]
    _write_at(root, bad_off + 95, b"\xff\xfe")  # inside the body: CRC no longer matches
    (root / "abort").touch()
    s = MessageStore(make_config(root))
    await s.start()
    try:
        assert s.get_max_phy_offset() == bad_off
        assert s.get_max_offset_in_queue(TOPIC, 0) == 17
        res = s.get_message("g", TOPIC, 0, 0, max_msg_nums=32)
        assert [int(decode_record(b).body[:9]) for b in res.message_buffer_list] == list(range(17))
        r = await s.put_message(MessageExtBrokerInner(topic=TOPIC, queue_id=0, body=b"again"))
        assert r.append_message_result.logics_offset == 17
    finally:
        await s.shutdown()
    # The discarded records are gone for good: a second restart does not resurrect them.
    (root / "abort").touch()
    s = MessageStore(make_config(root))
    await s.start()
    try:
        assert s.get_max_offset_in_queue(TOPIC, 0) == 18
    finally:
        await s.shutdown()
