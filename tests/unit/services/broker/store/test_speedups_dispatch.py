"""The compiled dispatch path (_speedups_index, _speedups_dispatch) against the pure-Python code.

Each accelerated function is run side by side with its ``_py_<name>`` oracle on two copies of
the same state (two directories): the IndexFile / ConsumeQueue bytes, the in-memory counters,
the return values and the exceptions (type and message) must all be the same. The module's
public names must be the compiled ones: a missing build fails here instead of silently running
the slower code. The tests call the compiled functions themselves, so they compare the same code
under ORBITMQ_NO_SPEEDUPS=1 (where the public names must be the Python ones).
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.broker.store import _speedups_dispatch, _speedups_index, consume_queue, index_file, index_service
from orbitmq.broker.store import message_store as message_store_mod
from orbitmq.broker.store import reput as reput_mod
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import ConsumeQueue
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_file import IndexFile
from orbitmq.broker.store.index_service import IndexService
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.reput import ReputMessageService
from orbitmq.common import sysflag
from tests.support.speedups import assert_in_use


def test_the_public_names_are_the_compiled_ones():
    """The compiled functions are in use (the Python ones with ORBITMQ_NO_SPEEDUPS=1)."""
    assert_in_use(index_file, "put_hashes", _speedups_index)
    assert_in_use(index_service, "build_index_many", _speedups_index)
    assert_in_use(consume_queue, "put_message_position_info", _speedups_dispatch)
    assert_in_use(message_store_mod, "dispatch_consume_queue", _speedups_dispatch)
    for py in (index_file._py_put_hashes, index_service._py_build_index_many,
               consume_queue._py_put_message_position_info, message_store_mod._py_dispatch_consume_queue):
        assert type(py).__name__ == "function"


# ---- String.hashCode of topic#key ----------------------------------------------------------------

_TEXT = st.text(st.characters(), max_size=40)  # surrogates included: the compiled hash declines them


@settings(max_examples=600, deadline=None)
@given(_TEXT, _TEXT)
def test_key_hash_is_index_key_hash(topic, key):
    try:
        expected = index_file.index_key_hash(topic + "#" + key)
    except UnicodeEncodeError:
        expected = None  # lone surrogate: the compiled path hands these to the Python code
    assert _speedups_index.index_key_hash(topic, key) == expected


def _min_value_key(topic: str) -> str:
    """Seven letters that make String.hashCode of `topic#key` (ASCII topic) Integer.MIN_VALUE:
    the residue left after `topic#` and the letters' base "A" is written in base 31."""
    head = 0
    for ch in topic + "#":
        head = (head * 31 + ord(ch)) & 0xFFFFFFFF
    rest = (0x80000000 - head * 31**7 - ord("A") * sum(31**i for i in range(7))) % 2**32
    digits = []
    for _ in range(7):
        rest, d = divmod(rest, 31)
        digits.append(chr(ord("A") + d))
    key = "".join(reversed(digits))
    assert index_file.index_key_hash(topic + "#" + key) == 0
    return key


def test_key_hash_edge_values():
    # A `topic#key` hashing to Integer.MIN_VALUE, whose abs is taken as 0.
    assert index_file.index_key_hash("polygenelubricants") == 0
    assert _speedups_index.index_key_hash("T", _min_value_key("T")) == 0
    for topic, key in [("", ""), ("T", ""), ("", "k"), ("\U0001F600", "\u00e9"), ("T" * 5000, "k" * 3000),
                       ("\uffff", "\U0010FFFF"), ("Aa", "BB"), ("BB", "Aa")]:
        assert _speedups_index.index_key_hash(topic, key) == index_file.index_key_hash(topic + "#" + key)
    assert _speedups_index.index_key_hash(b"T", "k") is None
    assert _speedups_index.index_key_hash("T", "\ud800") is None


# ---- IndexService.build_index_many ---------------------------------------------------------------

_UNIQ = st.one_of(
    st.none(),
    st.just(""),
    st.builds(lambda p, ms, c: p + f"{ms:08X}{c:04X}", st.sampled_from(["0A000007109A1B2C3D4E", "7F0000010001DEADBEEF"]),
              st.integers(0, 3), st.integers(0, 0x10F)),
    st.text(max_size=40),  # includes lone surrogates: both sides must report the same failure
)
_KEY = st.one_of(
    st.sampled_from(["Aa", "BB", "k", "order-1", "order-12", "\u00e9t\u00e9", "\U0001F600x", "AaAa", "BBBB",
                     "polygenelubricants", "\ud83d"]),
    st.text(st.characters(max_codepoint=0x7F, blacklist_characters=" "), min_size=1, max_size=12),
    st.text(min_size=1, max_size=6),
)
_RECORD = st.tuples(
    st.sampled_from(["T", "Other", "t\u00f6pic", "\U0001F600T", "bad\udc00"]),
    _UNIQ,
    st.one_of(st.lists(_KEY, max_size=5).map(" ".join), st.just("  a  b "), st.just(" ")),
    st.sampled_from([0, 0, 0, sysflag.TRANSACTION_ROLLBACK_TYPE, sysflag.TRANSACTION_PREPARED_TYPE,
                     sysflag.TRANSACTION_COMMIT_TYPE]),
    st.sampled_from([0, 1, 999, 1000, 1500, 65_000, -2_000, 3_000_000_000_000]),  # store-time step
    st.sampled_from([100, 100, 100, 0, -250]),  # offset step: re-dispatched records go backwards
    st.booleans() | st.just(True),  # success
)


def _req(offset, ts, topic, uniq, keys, flag, success=True) -> DispatchRequest:
    return DispatchRequest(topic=topic, queue_id=0, commit_log_offset=offset, msg_size=100, tags_code=0,
                           store_timestamp=ts, consume_queue_offset=0, keys=keys, uniq_key=uniq, sys_flag=flag,
                           success=success)


def _file_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _index_state(svc: IndexService) -> list:
    return [(_file_bytes(f.path), f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
             f.hash_slot_count, f.index_count) for f in svc.files]


def _service(d: str, slots: int, items: int) -> IndexService:
    svc = IndexService(MessageStoreConfig(store_path_root_dir=d, max_hash_slot_num=slots, max_index_num=items))
    assert svc.load(True)
    return svc


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # compared by type and message
        return ("raised", type(e), str(e))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_RECORD, min_size=1, max_size=60),
       st.sampled_from([(1, 2), (1, 5), (3, 4), (5, 6), (11, 9), (7, 40), (64, 200)]),
       st.lists(st.integers(1, 40), min_size=1, max_size=6), st.booleans())
def test_build_index_many_writes_what_the_python_run_writes(records, geometry, run_sizes, with_failed):
    """Hash collisions (few slots), slot chains, full files and rollovers (few items), records
    with more keys than a file has room for, re-dispatched offsets and failing records."""
    slots, items = geometry
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        py, cy = _service(d1, slots, items), _service(d2, slots, items)
        try:
            offset, ts = 1000, 1_700_000_000_000
            reqs = []
            for topic, uniq, keys, flag, dt, doff, success in records:
                offset, ts = max(0, offset + doff), ts + dt
                reqs.append(_req(offset, ts, topic, uniq, keys, flag, success))
            i = k = 0
            while i < len(reqs):
                run = reqs[i:i + run_sizes[k % len(run_sizes)]]
                if with_failed:
                    failed_py: list = []
                    failed_cy: list = []
                    index_service._py_build_index_many(py, run, failed_py.append)
                    _speedups_index.build_index_many(cy, run, failed_cy.append)
                    assert [id(r) for r in failed_py] == [id(r) for r in failed_cy]
                else:
                    assert _outcome(index_service._py_build_index_many, py, run, None) == \
                        _outcome(_speedups_index.build_index_many, cy, run, None)
                i += len(run)
                k += 1
            assert _index_state(cy) == _index_state(py)
            assert not cy._lock._is_owned()
            for topic, uniq, _keys, _flag, _dt, _doff, _ok in records:
                if uniq and uniq.isascii() and topic.isprintable():  # no lone surrogates to query
                    assert (cy.query_offset(topic, uniq, 64, 0, 2**62).phy_offsets
                            == py.query_offset(topic, uniq, 64, 0, 2**62).phy_offsets)
        finally:
            py.shutdown()
            cy.shutdown()


def test_a_full_index_file_rolls_over_mid_record(tmp_path):
    py, cy = _service(str(tmp_path / "a"), 3, 4), _service(str(tmp_path / "b"), 3, 4)
    try:
        reqs = [_req(100 * (i + 1), 1_700_000_000_000 + 700 * i, "T", f"U{i}", "k1 k2 k3 k4 k5 k6 k7", 0)
                for i in range(5)]
        index_service._py_build_index_many(py, reqs, None)
        _speedups_index.build_index_many(cy, reqs, None)
        assert len(cy.files) == len(py.files) > 5
        assert _index_state(cy) == _index_state(py)
    finally:
        py.shutdown()
        cy.shutdown()


def test_a_replaced_hasher_is_used_by_the_compiled_run(tmp_path):
    svc = _service(str(tmp_path), 7, 50)
    calls = []
    real = svc._hasher.key_hash

    def key_hash(topic: str, key: str) -> int:
        calls.append(key)
        return real(topic, key)

    svc._hasher.key_hash = key_hash
    try:
        svc.build_index_many([_req(100, 1_700_000_000_000, "T", "U1", "a b", 0)], None)
        assert calls == ["a", "b", "U1"]
    finally:
        svc.shutdown()


def test_the_run_reports_an_index_file_it_cannot_create(tmp_path):
    flags = SimpleNamespace(errors=0)
    flags.make_index_file_error = lambda: setattr(flags, "errors", flags.errors + 1)
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    svc = IndexService(MessageStoreConfig(store_path_root_dir=str(tmp_path), max_hash_slot_num=3, max_index_num=4),
                       store_path=str(blocker / "index"), running_flags=flags)
    try:
        svc.build_index_many([_req(100, 1_700_000_000_000, "T", "U1", "", 0),
                              _req(200, 1_700_000_000_001, "T", "U2", "", 0)], None)
        assert flags.errors == 2 and svc.files == []
    finally:
        svc.shutdown()


# ---- IndexFile.put_hashes ------------------------------------------------------------------------

_HASH = st.one_of(st.integers(0, 2**31 - 1), st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 2**31 - 1]),
                  st.integers(2**31, 2**33), st.booleans())
_BIG = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**65), st.integers(-(2**65), -(2**63) - 1))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(1, 2), (3, 4), (5, 9), (8, 30)]),
       st.lists(st.tuples(st.lists(_HASH, max_size=6), st.one_of(st.integers(0, 2**40), _BIG),
                          st.one_of(st.integers(1_600_000_000_000, 1_800_000_000_000), _BIG, st.integers(-5, 5)),
                          st.booleans(), st.booleans()), min_size=1, max_size=12),
       st.integers(0, 3_000))
def test_put_hashes_is_the_python_put(geometry, puts, start_ts):
    slots, items = geometry
    with tempfile.TemporaryDirectory() as d:
        files = [IndexFile(os.path.join(d, name), slots, items, 500, start_ts) for name in ("py", "cy")]
        try:
            for hashes, phy, ts, write_header, as_tuple in puts:
                arg = tuple(hashes) if as_tuple else hashes
                out_py = _outcome(index_file._py_put_hashes, files[0], arg, phy, ts, write_header)
                out_cy = _outcome(_speedups_index.put_hashes, files[1], arg, phy, ts, write_header)
                assert out_cy == out_py
                state = [(f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset,
                          f.hash_slot_count, f.index_count) for f in files]
                assert state[0] == state[1]
                assert _file_bytes(files[0].path) == _file_bytes(files[1].path)
        finally:
            for f in files:
                f.close()


def test_put_hashes_on_a_closed_file_raises_as_python(tmp_path):
    f = IndexFile(str(tmp_path / "x"), 3, 4)
    f.close()
    assert _outcome(_speedups_index.put_hashes, f, [1], 10, 10) == _outcome(index_file._py_put_hashes, f, [1], 10, 10)


# ---- ConsumeQueue.put_message_position_info and the store's dispatcher ---------------------------

_ENTRY_STEP = st.one_of(
    st.just(1), st.just(1), st.just(1), st.just(0), st.just(-1), st.integers(2, 40),  # next, repeat, back, gap
)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 50), st.lists(st.tuples(_ENTRY_STEP, st.integers(1, 5000), st.integers(-(2**63), 2**63 - 1),
                                              st.sampled_from(["ok", "ok", "ok", "big", "neg", "float"])),
                                    min_size=1, max_size=80),
       st.sampled_from([20, 60, 100, 400]))
def test_put_message_position_info_is_the_python_put(first, steps, segment):
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        py, cy = ConsumeQueue("T", 0, d1, segment), ConsumeQueue("T", 0, d2, segment)
        try:
            idx, phy = first, 1000
            for step, size, tags, odd in steps:
                idx = max(0, idx + step)
                phy += size
                args = [phy, size, tags, idx]
                if odd == "big":
                    args[2] = 2**64 + tags
                elif odd == "neg":
                    args[1] = -size
                elif odd == "float":
                    args[0] = float(phy)
                assert _outcome(consume_queue._py_put_message_position_info, py, *args) == \
                    _outcome(_speedups_dispatch.put_message_position_info, cy, *args)
                assert (cy.max_physic_offset, cy.min_logic_offset) == (py.max_physic_offset, py.min_logic_offset)
                assert [(mf.file_name, mf.wrote_position, bytes(mf.mm)) for mf in cy.mapped_file_queue.mapped_files] \
                    == [(mf.file_name, mf.wrote_position, bytes(mf.mm)) for mf in py.mapped_file_queue.mapped_files]
        finally:
            py.destroy()
            cy.destroy()


class _Store:
    """What MessageStore's consume-queue dispatcher reads: the queue table and find_consume_queue."""

    find_consume_queue = MessageStore.find_consume_queue

    def __init__(self, d: str, segment: int) -> None:
        self.config = SimpleNamespace(consume_queue_dir=d, mapped_file_size_consume_queue=segment)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.dispatched_store_timestamp = 0

    def _redispatch_consume_queue_gap(self, cq: ConsumeQueue) -> bool:
        return False  # no reput service to dispatch again: a queue gap is blank-filled

    def files(self) -> list:
        return sorted((t, q, mf.file_name, mf.wrote_position, bytes(mf.mm))
                      for t, queues in self.consume_queue_table.items() for q, cq in queues.items()
                      for mf in cq.mapped_file_queue.mapped_files)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A", "B", "\u00e9"]), st.integers(0, 3),
                          st.sampled_from([0, 0, 0x4, 0x8, 0xC, 0x1, 0x3]), st.integers(1, 3000),
                          st.integers(-(2**63), 2**63 - 1), st.sampled_from([1, 1, 1, 0, 3])),
                min_size=1, max_size=100))
def test_dispatch_consume_queue_is_the_python_dispatch(records):
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        py, cy = _Store(d1, 100), _Store(d2, 100)
        try:
            next_idx: dict[tuple[str, int], int] = {}
            phy = 0
            for n, (topic, queue, flag, size, tags, step) in enumerate(records):
                idx = next_idx[topic, queue] = next_idx.get((topic, queue), -1) + step
                req = DispatchRequest(topic, queue, phy, size, tags, 1_700_000_000_000 + n, max(idx, 0), sys_flag=flag)
                phy += size
                message_store_mod._py_dispatch_consume_queue(py, req)
                _speedups_dispatch.dispatch_consume_queue(cy, req)
                assert cy.dispatched_store_timestamp == py.dispatched_store_timestamp
            assert cy.files() == py.files()
        finally:
            for s in (py, cy):
                for queues in s.consume_queue_table.values():
                    for cq in queues.values():
                        cq.destroy()


def test_entries_keep_the_20_byte_layout(tmp_path):
    cq = ConsumeQueue("T", 0, str(tmp_path), 200)
    for i in range(12):
        assert _speedups_dispatch.put_message_position_info(cq, 1000 + 100 * i, 100, -i, i) is True
    raw = b"".join(bytes(mf.mm[:mf.wrote_position]) for mf in cq.mapped_file_queue.mapped_files)
    assert list(struct.iter_unpack(">qiq", raw)) == [(1000 + 100 * i, 100, -i) for i in range(12)]
    cq.destroy()


@pytest.mark.parametrize("bad", [None, "x", 1.5])
def test_odd_arguments_raise_as_python(tmp_path, bad):
    a, b = ConsumeQueue("T", 0, str(tmp_path / "a"), 200), ConsumeQueue("T", 0, str(tmp_path / "b"), 200)
    for q in (a, b):
        q.put_message_position_info(0, 10, 0, 0)
        q.put_message_position_info(10, 10, 0, 1)
    assert _outcome(_speedups_dispatch.put_message_position_info, a, 20, 10, bad, 2) == \
        _outcome(consume_queue._py_put_message_position_info, b, 20, 10, bad, 2)
    assert _outcome(_speedups_dispatch.put_message_position_info, a, bad, 10, 0, 2) == \
        _outcome(consume_queue._py_put_message_position_info, b, bad, 10, 0, 2)
    a.destroy()
    b.destroy()


# ---- ReputMessageService: runs of handed-off records --------------------------------------------

def test_the_reput_run_and_the_store_dispatcher_are_compiled(tmp_path):
    """Compiled (Python with ORBITMQ_NO_SPEEDUPS=1): the reput run and the store's dispatcher."""
    assert_in_use(reput_mod, "dispatch_handed_off", _speedups_dispatch)
    assert type(reput_mod._py_dispatch_handed_off).__name__ == "function"
    # The store's ConsumeQueue dispatcher is the function in use itself, bound to the store.
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(tmp_path)))
    store.reput_service = ReputMessageService(_Log())
    store._install_dispatchers()
    dispatcher = store.reput_service.dispatchers[0]
    assert dispatcher.func is message_store_mod.dispatch_consume_queue
    assert_in_use(message_store_mod, "dispatch_consume_queue", _speedups_dispatch)
    assert dispatcher.args == (store,)


class _Log:
    """The CommitLog as ReputMessageService's constructor sees it."""

    handoff = None


def _reput_setup(log_calls: list, fail_at: set, with_listeners: bool):
    svc = ReputMessageService(_Log())

    def head(req):
        log_calls.append(("cq", req.commit_log_offset))
        if ("cq", req.commit_log_offset) in fail_at:
            raise ValueError("cq failed")

    def listener(*args):
        log_calls.append(("listen", *args[:5], id(args[5])))
        if ("listen", args[2]) in fail_at:
            raise RuntimeError("listener failed")

    svc.arrival_listeners = [listener, listener] if with_listeners else []
    return svc, [head]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3),
       st.lists(st.tuples(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC, 0x1]), st.integers(-2, 5),
                          st.sampled_from(["next", "next", "next", "stale", "gap"])), max_size=30),
       st.integers(0, 40), st.booleans(), st.sets(st.tuples(st.sampled_from(["cq", "listen"]), st.integers(0, 8))))
def test_dispatch_handed_off_is_the_python_run(start_done, entries, max_records, notify, fail_at):
    fail_at = {(kind, 100 * n if kind == "cq" else n) for kind, n in fail_at}
    handed = []
    at = 0
    for i, (flag, cq_off, kind) in enumerate(entries):
        if kind == "stale":
            where = max(0, at - 100)
        elif kind == "gap":
            where = at + 50
        else:
            where = at
        handed.append(DispatchRequest("T", i % 3, where, 100, i, 1_700_000_000_000 + i, cq_off,
                                      properties={"i": str(i)}, sys_flag=flag))
        at = where + 100
    results = []
    for fn in (reput_mod._py_dispatch_handed_off, _speedups_dispatch.dispatch_handed_off):
        calls: list = []
        svc, head = _reput_setup(calls, fail_at, True)
        svc._handoff.extend(handed)
        run: list = []
        listeners = svc.arrival_listeners if notify else None
        offset, done = fn(svc, 0, start_done, max_records, head, listeners, run)
        results.append((offset, done, svc.reput_from_offset, [id(r) for r in run], calls,
                        [id(r) for r in svc._handoff]))
    assert results[0] == results[1]


def test_dispatch_handed_off_logs_what_python_logs(caplog):
    reqs = [DispatchRequest("T", 0, 100 * i, 100, 0, 1, i) for i in range(3)]
    records = []
    for fn in (reput_mod._py_dispatch_handed_off, _speedups_dispatch.dispatch_handed_off):
        caplog.clear()
        calls: list = []
        svc, head = _reput_setup(calls, {("cq", 100), ("listen", 3)}, True)
        svc._handoff.extend(reqs)
        with caplog.at_level("ERROR", logger=reput_mod.log.name):
            fn(svc, 0, 0, 10, head, svc.arrival_listeners, [])
        records.append([(r.name, r.levelname, re.sub(" at 0x[0-9a-f]+", "", r.getMessage()), r.exc_info[0])
                        for r in caplog.records])
    assert records[0] == records[1] and len(records[0]) == 3


def test_a_replaced_notify_or_take_is_called(tmp_path):
    reqs = [DispatchRequest("T", 0, 100 * i, 100, 0, 1, i) for i in range(3)]
    svc = ReputMessageService(_Log())
    svc.arrival_listeners = [lambda *a: None]
    notified, taken = [], []
    svc._notify = notified.append
    real_take = svc._take_handed_off
    svc._take_handed_off = lambda off: taken.append(off) or real_take(off)
    svc._handoff.extend(reqs)
    run: list = []
    assert _speedups_dispatch.dispatch_handed_off(svc, 0, 0, 10, [], svc.arrival_listeners, run) == (300, 3)
    assert notified == reqs and run == reqs and taken == [0, 100, 200, 300]
