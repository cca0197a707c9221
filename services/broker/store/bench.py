"""``orbitmq bench store``: storage-engine throughput beside the disk's raw write rate.

Appends 1 KiB messages with one writer under ASYNC_FLUSH and SYNC_FLUSH, reads them back
queue by queue, runs SYNC_FLUSH group commit with many concurrent writers, and prints each
rate with its ratio to plain ``os.write`` of same-size records on the same disk in this run.

``--transient-store-pool`` runs instead the same appends with transientStorePoolEnable off and
on, side by side (transient_store_pool.py), and how long the commit service then takes to make
everything readable. Figures only: nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import tempfile
import time

from orbitmq.broker.store.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_id import create_uniq_id

TOPIC = "BenchmarkTest"
QUEUES = 4
GOAL_ASYNC_RATIO = 0.40
GOAL_SYNC_GROUP_RATE = 10_000


def _messages(n: int, size: int) -> list[MessageExtBrokerInner]:
    """One fresh message object per put, as a producer sends them: TAGS, KEYS and a distinct
    UNIQ_KEY, the properties string encoded once per request as the broker does."""
    body = os.urandom(size)
    now = int(time.time() * 1000)
    msgs = []
    for i in range(n):
        props = {"TAGS": "bench", "KEYS": f"order-{i}", "UNIQ_KEY": create_uniq_id()}
        msgs.append(MessageExtBrokerInner(topic=TOPIC, queue_id=i % QUEUES, body=body, properties=props,
                                          properties_string=properties_to_string(props), born_timestamp=now,
                                          born_host=("127.0.0.1", 50000)))
    return msgs


def raw_write(directory: str, n: int, size: int) -> tuple[float, float]:
    """(records/s, CPU µs per record of this thread) for plain os.write of ``size``-byte records."""
    path = os.path.join(directory, "raw-os-write.bin")
    record = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        c0 = time.thread_time()
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, record)
        elapsed = time.perf_counter() - t0
        cpu = time.thread_time() - c0
    finally:
        os.close(fd)
        os.unlink(path)
    return n / elapsed, cpu / n * 1e6


def _config(root: str, flush: str, seg: int, warm: bool, pool: int = 0) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root, flush_disk_type=flush, mapped_file_size_commit_log=seg,
                              message_index_enable=False, warm_maped_file_enable=warm,
                              transient_store_pool_enable=pool > 0, transient_store_pool_size=max(pool, 1))


async def _append(root: str, flush: str, n: int, size: int, seg: int, writers: int,
                  warm: bool, batch: int = 1, pool: int = 0) -> tuple[float, MessageStore, float]:
    """(messages/s, the store, CPU µs per message of this thread) for n puts; ``pool``: that
    many transient store pool buffers (0: no pool)."""
    store = MessageStore(_config(root, flush, seg, warm, pool))
    await store.start()
    msgs = _messages(n, size)
    # The pre-built messages are the harness's, not the store's: keep the GC from walking them.
    gc.collect()
    gc.freeze()
    bad = 0

    async def writer(part: list[MessageExtBrokerInner]) -> None:
        nonlocal bad
        put = store.put_message
        for m in part:
            r = await put(m)
            if r.status is not PutMessageStatus.PUT_OK:
                bad += 1

    async def batch_writer(part: list[MessageExtBrokerInner]) -> None:
        nonlocal bad
        put = store.put_messages
        for i in range(0, len(part), batch):
            r = await put(part[i : i + batch])
            if r.status is not PutMessageStatus.PUT_OK:
                bad += 1

    c0 = time.thread_time()
    t0 = time.perf_counter()
    if batch > 1:
        await batch_writer(msgs)
    elif writers == 1:
        await writer(msgs)
    else:
        await asyncio.gather(*(writer(msgs[i::writers]) for i in range(writers)))
    elapsed = time.perf_counter() - t0
    cpu = time.thread_time() - c0
    gc.unfreeze()
    if bad:
        raise RuntimeError(f"{bad} puts were not PUT_OK")
    return n / elapsed, store, cpu / n * 1e6


def _dispatch_rate(store: MessageStore) -> float:
    """Finish dispatching (ReputMessageService) so every message is readable; its rate."""
    t0 = time.perf_counter()
    done = store.reput_service.do_reput(notify=False)
    elapsed = time.perf_counter() - t0
    return done / elapsed if done and elapsed > 0 else float("nan")


async def _read_back(store: MessageStore) -> tuple[float, float]:
    count = 0
    nbytes = 0
    t0 = time.perf_counter()
    for qid in range(QUEUES):
        offset = 0
        while True:
            r = store.get_message("bench", TOPIC, qid, offset)
            if r.status is not GetMessageStatus.FOUND:
                break
            count += r.message_count
            nbytes += r.buffer_total_size
            offset = r.next_begin_offset
    elapsed = time.perf_counter() - t0
    return count / elapsed, nbytes / elapsed


def _line(name: str, rate: float, size: int, raw: float | None = None) -> str:
    text = f"{name:<44} {rate:>12,.0f} msgs/s {rate * size / 1e6:>9.1f} MB/s"
    if raw:
        text += f"   {rate / raw:6.1%} of raw"
    return text


async def _until_readable(store: MessageStore, timeout: float = 30.0) -> float:  # noqa: ASYNC109
    """Seconds until every appended byte is committed, i.e. readable (0 without a pool)."""
    mfq = store.commit_log.mapped_file_queue
    t0 = time.perf_counter()
    while store.commit_log.get_max_offset() < mfq.get_max_wrote_position():
        if time.perf_counter() - t0 > timeout:
            break
        await asyncio.sleep(0.001)
    return time.perf_counter() - t0


POOL_WHY_SYNC = ("SYNC_FLUSH with the pool: RocketMQ 5 allows it (4.x's isTransientStorePoolEnable required "
                 "ASYNC_FLUSH), but a put is durable only once CommitRealTimeService has copied it into the "
                 "file, which waits for commitCommitLogLeastPages pages or the commitCommitLogThoroughInterval "
                 "(200 ms), so group commit answers in batches about that far apart")
POOL_WHY_SLAVE = "not measured on a SLAVE: upstream never uses the pool there (outside controller mode)"


async def run_pool_comparison(args: argparse.Namespace, base: str, size: int, seg: int, warm: bool,
                              raw: float) -> None:
    """The same appends with transientStorePoolEnable off and on, one after the other."""
    pool = args.pool_size
    print(f"transient store pool: transientStorePoolSize={pool} buffers of one {args.segment_mb} MiB segment, "
          "commitIntervalCommitLog=200 ms, commitCommitLogLeastPages=4, commitCommitLogThoroughInterval=200 ms")
    rows: dict[str, dict[bool, str]] = {}
    for on in (False, True):
        tag = "pool" if on else "nopool"
        n_pool = pool if on else 0
        rate, store, cpu = await _append(os.path.join(base, f"async-{tag}"), ASYNC_FLUSH, args.messages, size, seg,
                                         1, warm, pool=n_pool)
        lag = await _until_readable(store)
        if store.transient_store_pool is not None and store.transient_store_pool._locked:
            locked = f"{len(store.transient_store_pool._locked)}/{pool} mlock'd"
        else:
            locked = "mlock refused (RLIMIT_MEMLOCK)" if on else "-"
        await store.shutdown()
        rows.setdefault("ASYNC_FLUSH append, 1 writer", {})[on] = (
            f"{rate:>10,.0f} msgs/s {rate / raw:6.1%} of raw, {cpu:5.2f} µs CPU/msg")
        rows.setdefault("  then all readable (committed) after", {})[on] = f"{lag * 1000:>10,.1f} ms ({locked})"
        brate, store, bcpu = await _append(os.path.join(base, f"asyncb-{tag}"), ASYNC_FLUSH, args.messages, size,
                                           seg, 1, warm, batch=32, pool=n_pool)
        await _until_readable(store)
        await store.shutdown()
        rows.setdefault("ASYNC_FLUSH batch append (32/put_messages)", {})[on] = (
            f"{brate:>10,.0f} msgs/s {brate / raw:6.1%} of raw, {bcpu:5.2f} µs CPU/msg")
        sync_n = args.writers * 4
        srate, store, _ = await _append(os.path.join(base, f"syncN-{tag}"), SYNC_FLUSH, sync_n, size, seg,
                                        args.writers, warm, pool=n_pool)
        await store.shutdown()
        rows.setdefault(f"SYNC_FLUSH group commit, {args.writers} writers", {})[on] = f"{srate:>10,.0f} msgs/s"
    print(f"{'':<44} {'transientStorePoolEnable=false':<44} {'transientStorePoolEnable=true'}")
    for name, cols in rows.items():
        print(f"{name:<44} {cols[False]:<44} {cols[True]}")
    print()
    print(f"note: {POOL_WHY_SYNC}.")
    print(f"note: {POOL_WHY_SLAVE}.")
    print("note: with the pool a kill -9 loses what was acknowledged but not yet committed (at most one "
          "commit interval); without it appends are in the page cache at once.")


async def run(args: argparse.Namespace) -> int:
    warm = not args.no_warm
    base = args.dir or tempfile.mkdtemp(prefix="orbitmq-bench-store-")
    os.makedirs(base, exist_ok=True)
    size = args.size
    seg = args.segment_mb * 1024 * 1024
    try:
        raw, raw_cpu = raw_write(base, args.messages, size)
        print(f"store benchmark in {base}: {args.messages:,} x {size} B messages, {QUEUES} queues, "
              f"{args.segment_mb} MiB segments, warmMapedFileEnable={str(warm).lower()}")
        print(_line("raw os.write of records", raw, size))
        if args.transient_store_pool:
            await run_pool_comparison(args, base, size, seg, warm, raw)
            return 0

        rate, store, put_cpu = await _append(os.path.join(base, "async"), ASYNC_FLUSH, args.messages, size, seg, 1,
                                             warm)
        print(_line("ASYNC_FLUSH append, 1 writer", rate, size, raw))
        # Informational: CPU time of the writing thread, less disturbed by other load on the machine.
        print(f"{'  CPU per message (writer thread)':<44} raw {raw_cpu:.2f} µs, append {put_cpu:.2f} µs"
              f"   {raw_cpu / put_cpu:6.1%} of raw")
        dispatch = _dispatch_rate(store)
        print(f"{'dispatch to ConsumeQueues (reput backlog)':<44} {dispatch:>12,.0f} msgs/s")
        read_rate, read_bps = await _read_back(store)
        print(f"{'read back by queue (get_message)':<44} {read_rate:>12,.0f} msgs/s {read_bps / 1e6:>9.1f} MB/s")
        await store.shutdown()
        async_ratio = rate / raw

        batch_rate, store, _ = await _append(os.path.join(base, "asyncb"), ASYNC_FLUSH, args.messages, size, seg, 1,
                                          warm, batch=32)
        print(_line("ASYNC_FLUSH batch append (32/put_messages)", batch_rate, size, raw))
        await store.shutdown()

        sync_rate, store, _ = await _append(os.path.join(base, "sync1"), SYNC_FLUSH, args.sync_messages, size, seg, 1, warm)
        print(_line("SYNC_FLUSH append, 1 writer", sync_rate, size, raw))
        await store.shutdown()

        group_rate, store, _ = await _append(os.path.join(base, "syncN"), SYNC_FLUSH, args.sync_messages * 4, size, seg,
                                          args.writers, warm)
        print(_line(f"SYNC_FLUSH group commit, {args.writers} writers", group_rate, size, raw))
        await store.shutdown()

        print()
        batch_ratio = batch_rate / raw
        print(f"goal: async appends >= {GOAL_ASYNC_RATIO:.0%} of raw os.write rate: measured {async_ratio:.1%}"
              f" one put per message -> {'met' if async_ratio >= GOAL_ASYNC_RATIO else 'NOT met'};"
              f" {batch_ratio:.1%} in 32-message batches -> {'met' if batch_ratio >= GOAL_ASYNC_RATIO else 'NOT met'}")
        print(f"goal: SYNC_FLUSH group commit >= {GOAL_SYNC_GROUP_RATE:,} msgs/s with {args.writers} writers:"
              f" measured {group_rate:,.0f} ({group_rate / GOAL_SYNC_GROUP_RATE:.2f}x)"
              f" -> {'met' if group_rate >= GOAL_SYNC_GROUP_RATE else 'NOT met'}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench store", description=__doc__.splitlines()[0])
    p.add_argument("--dir", help="store directory (default: a new temp dir); put it on the disk to measure")
    p.add_argument("--messages", type=int, default=200_000, help="messages for raw and ASYNC_FLUSH runs")
    p.add_argument("--sync-messages", type=int, default=5_000, help="messages for the 1-writer SYNC_FLUSH run "
                   "(the group-commit run uses 4x)")
    p.add_argument("--size", type=int, default=1024, help="message body size in bytes")
    p.add_argument("--writers", type=int, default=64, help="concurrent writers for group commit")
    p.add_argument("--segment-mb", type=int, default=256, help="CommitLog segment size (MiB)")
    p.add_argument("--keep", action="store_true", help="keep the store directory")
    p.add_argument("--transient-store-pool", action="store_true", help="compare the appends with "
                   "transientStorePoolEnable off and on (instead of the standard runs)")
    p.add_argument("--pool-size", type=int, default=5, help="transientStorePoolSize for --transient-store-pool")
    p.add_argument("--no-warm", action="store_true", help="measure with warmMapedFileEnable=false (the default "
                   "store config): fresh segment pages fault on first write")
    return asyncio.run(run(p.parse_args(argv)))
