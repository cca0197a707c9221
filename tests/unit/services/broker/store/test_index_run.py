"""IndexService.build_index_many (one lock and one header write per run) writes exactly what
build_index does record by record, and the reput service hands it runs of handed-off records."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from test_index_fast_path import _RECORD, _file_bytes, _req

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_service import IndexService


def _state(svc: IndexService) -> list:
    return [(_file_bytes(f), f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
             f.hash_slot_count, f.index_count) for f in svc.files]


@settings(max_examples=150, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=40), st.sampled_from([(5, 6), (3, 4), (11, 9), (1, 2)]),
       st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_runs_write_what_one_record_at_a_time_writes(records, geometry, run_sizes):
    slots, items = geometry
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        one = IndexService(MessageStoreConfig(store_path_root_dir=d1, max_hash_slot_num=slots, max_index_num=items))
        run = IndexService(MessageStoreConfig(store_path_root_dir=d2, max_hash_slot_num=slots, max_index_num=items))
        assert one.load(True) and run.load(True)
        offset, ts = 1000, 1_700_000_000_000
        reqs = []
        for topic, uniq, keys, flag, dt, doff in records:
            offset, ts = max(0, offset + doff), ts + dt
            reqs.append(_req(offset, ts, topic, uniq, keys, flag))
        for req in reqs:
            one.build_index(req)
        i = k = 0
        while i < len(reqs):
            n = run_sizes[k % len(run_sizes)]
            run.build_index_many(reqs[i:i + n], None)
            i += n
            k += 1
        try:
            assert _state(run) == _state(one)
            for topic, uniq, _keys, _flag, _dt, _doff in records:
                for key in filter(None, [uniq]):
                    assert (run.query_offset(topic, key, 64, 0, 2**62).phy_offsets
                            == one.query_offset(topic, key, 64, 0, 2**62).phy_offsets)
        finally:
            one.shutdown()
            run.shutdown()


def test_a_failing_record_is_reported_and_the_run_goes_on(tmp_path, monkeypatch):
    svc = IndexService(MessageStoreConfig(store_path_root_dir=str(tmp_path), max_hash_slot_num=7, max_index_num=50))
    assert svc.load(True)
    reqs = [_req(100 * (i + 1), 1_700_000_000_000 + i, "T", f"U{i}", f"k{i}") for i in range(4)]
    bad = reqs[1]
    real = svc._hasher.key_hash

    def key_hash(topic: str, key: str) -> int:
        if key == "k1":
            raise ValueError("boom")
        return real(topic, key)

    monkeypatch.setattr(svc._hasher, "key_hash", key_hash)
    failed: list[DispatchRequest] = []
    svc.build_index_many(reqs, failed.append)
    try:
        assert failed == [bad]
        (f,) = svc.files
        assert f.index_count == 1 + 2 * 3  # the first item is the unused slot 0
        assert f.end_phy_offset == reqs[-1].commit_log_offset
    finally:
        svc.shutdown()


async def test_reput_hands_runs_to_the_index_and_writes_the_same_files(tmp_path, monkeypatch):
    from orbitmq.broker.store import commit_log as commit_log_module
    from orbitmq.broker.store.message_store import MessageStore
    from orbitmq.broker.store.model import MessageExtBrokerInner

    clock = {"now": 1_800_000_000_000}
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: clock["now"])
    stores = []
    for name in ("run", "one"):
        cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / name), max_hash_slot_num=13, max_index_num=40)
        s = MessageStore(cfg)
        await s.start()
        if name == "one":
            s.reput_service.run_dispatchers = {}
        stores.append(s)
    try:
        seen: list[list[tuple[int, str, str]]] = [[], []]
        for i in range(12):
            clock["now"] += 700
            for j, s in enumerate(stores):
                msgs = [MessageExtBrokerInner("T", i % 2, b"x" * (10 + k), 0,
                                              {"UNIQ_KEY": f"U{i:03d}{k:02d}", "KEYS": f"a{k} b{i}"},
                                              born_host=("10.1.2.3", 4000))
                        for k in range(1 + i % 5)]
                result = await s.put_messages(msgs)
                assert result.is_ok()
                seen[j].extend((phy, m.properties["UNIQ_KEY"], f"b{i}")
                               for (phy, _q), m in zip(result.append_message_result.offsets, msgs, strict=True))
                s.reput_service.do_reput()
        assert seen[0] == seen[1]
        run, one = (s.index_service for s in stores)
        assert len(run.files) > 2
        assert _state(run) == _state(one)
        for phy, uniq, key in seen[0]:
            assert phy in run.query_offset("T", uniq, 64, 0, 2**62).phy_offsets
            assert phy in run.query_offset("T", key, 64, 0, 2**62).phy_offsets
    finally:
        for s in stores:
            await s.shutdown()
