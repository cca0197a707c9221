"""The compiled SEND_BATCH_MESSAGE append path (_speedups_batch.decode_batch and
_speedups_commitlog._layout_uniform/_write_uniform) gives exactly what the pure-Python code gives:
the same tuples and errors for any batch body, and the same mapped-file bytes, results, queue
offsets and hand-off DispatchRequests for any uniform batch; and the compiled code is the one in
use (a missing build fails here, it is never skipped). The tests call the compiled functions
themselves, so they compare the same code under ORBITMQ_NO_SPEEDUPS=1."""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
from collections import deque
from dataclasses import astuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.broker.processors import _speedups_batch, batch_codec
from orbitmq.broker.processors.batch_codec import BatchItem, encode_batch
from orbitmq.broker.store import _speedups_commitlog
from orbitmq.broker.store import commit_log as commit_log_module
from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.common import sysflag
from orbitmq.common.message import parse_properties_exact, properties_to_string
from tests.support.speedups import assert_in_use

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def _uniform_passes(layout, write):
    """put_uniform_items with the given passes (the Python oracle or the compiled functions)."""
    saved = commit_log_module._layout_uniform, commit_log_module._write_uniform
    commit_log_module._layout_uniform, commit_log_module._write_uniform = layout, write
    try:
        yield
    finally:
        commit_log_module._layout_uniform, commit_log_module._write_uniform = saved


def _outcome(fn, *args):
    """What a call gives: ("ok", value) or ("raise", exception type, message)."""
    try:
        return "ok", fn(*args)
    except Exception as exc:  # noqa: BLE001 - the very exception is what is compared
        return "raise", type(exc), str(exc)


def test_the_compiled_functions_are_in_use() -> None:
    """The compiled functions are in use (the Python ones with ORBITMQ_NO_SPEEDUPS=1)."""
    assert_in_use(batch_codec, "decode_batch", _speedups_batch)
    assert_in_use(commit_log_module, "_layout_uniform", _speedups_commitlog)
    assert_in_use(commit_log_module, "_write_uniform", _speedups_commitlog)


# --- decode_batch ----------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
_props = st.dictionaries(_text.filter(lambda s: "\x01" not in s and "\x02" not in s and s), _text, max_size=4)
_items = st.lists(st.builds(BatchItem, st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=300),
                            _props.map(properties_to_string) | _text), max_size=6)


@SETTINGS
@given(_items, st.sampled_from([bytes, bytearray, memoryview]))
def test_decode_batch_matches_python_on_well_formed_bodies(items, kind) -> None:
    body = encode_batch(items)
    got = _outcome(_speedups_batch.decode_batch, kind(body))
    assert got == _outcome(batch_codec._py_decode_batch, kind(body))
    if items:
        assert got == ("ok", [tuple(item) for item in items])
        assert all(type(b) is bytes for _, b, _ in got[1])


@SETTINGS
@given(_items, st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=4),
       st.integers(0, 4000), st.binary(max_size=30))
def test_decode_batch_matches_python_on_damaged_bodies(items, flips, cut, extra) -> None:
    body = bytearray(encode_batch(items))
    for at, value in flips:
        if body:
            body[at % len(body)] = value
    for data in (bytes(body), bytes(body[:cut]), bytes(body) + extra, extra):
        assert _outcome(_speedups_batch.decode_batch, data) == _outcome(batch_codec._py_decode_batch, data)


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x00" * 19, b"\x00" * 20, b"\x00" * 22,
    struct.pack(">iiiii", 22, 0, 0, 7, 0) + b"\x00\x00",
    struct.pack(">iiiii", 24, 0, 0, 7, 0) + b"\x00\x02\xff\xfe",  # properties not UTF-8
    struct.pack(">iiiii", 24, 0, 0, 7, 0) + b"\x00\x02\xed\xa0",  # an encoded surrogate
    struct.pack(">iiiii", 22, 0, 0, 7, -1) + b"\x00\x00",
    struct.pack(">iiiii", -5, 0, 0, 7, 0) + b"\x00\x00",
    struct.pack(">iiiii", 1 << 30, 0, 0, 7, 0) + b"\x00\x00",
    struct.pack(">iiiii", 23, 0, 0, 7, 0) + b"\x00\xff\xff\x00",  # negative properties length
    "not bytes", 5, None,
])
def test_decode_batch_matches_python_on_edge_cases(data) -> None:
    assert _outcome(_speedups_batch.decode_batch, data) == _outcome(batch_codec._py_decode_batch, data)


# --- put_uniform_items ----------------------------------------------------------------------

FILE_SIZE = 64 * 1024


def _commit_log(root: str, store_host: tuple[str, int]) -> CommitLog:
    cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=FILE_SIZE,
                             allocate_mapped_file_enable=False, max_message_size=4096)
    cl = CommitLog(cfg, store_host, StoreCheckpoint(os.path.join(root, "checkpoint")))
    cl.load()
    cl.mapped_file_queue.get_last_mapped_file_or_create(0)
    return cl


def _state(cl: CommitLog, result) -> tuple:
    if result is None:
        res = None
    else:
        ar = result.append_message_result
        res = (result.status, ar.status, ar.wrote_offset, ar.wrote_bytes, ar.msg_id, ar.store_timestamp,
               ar.logics_offset, ar.msg_num, ar.offsets)
    handed = [astuple(r) for r in cl.handoff] if cl.handoff is not None else None
    files = [bytes(mf.mm) for mf in cl.mapped_file_queue.mapped_files]
    return (res, handed, dict(cl.topic_queue_table), files, cl.put_message_times_total,
            cl.put_message_size_total, [mf.wrote_position for mf in cl.mapped_file_queue.mapped_files])


_nasty_text = st.text(max_size=20)  # lone surrogates included: the UTF-8 encode must fail alike
_item = st.tuples(
    st.one_of(st.integers(-(1 << 31), (1 << 31) - 1), st.sampled_from([1 << 31, -(1 << 31) - 1, True])),
    st.one_of(st.binary(max_size=1500), st.binary(max_size=50).map(bytearray), st.binary(max_size=50).map(memoryview)),
    st.one_of(st.none(), _props),
    st.one_of(st.none(), _text, _nasty_text, st.just("")),
)


def _send_batch_item(wire: str, flag: int, body: bytes) -> tuple:
    """(flag, body, properties, properties_string) as SendMessageProcessor._send_batch builds them."""
    props, exact = parse_properties_exact(wire)
    return flag, body, props, wire if exact and props else None


_wire_item = st.builds(_send_batch_item, _props.map(properties_to_string) | _text,
                       st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=1500))


@SETTINGS
@given(
    batches=st.lists(st.tuples(st.lists(_wire_item | _item, max_size=8),
                               st.sampled_from([0, sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE,
                                                sysflag.TRANSACTION_COMMIT_TYPE | sysflag.MULTI_TAGS_FLAG,
                                                sysflag.BORNHOST_V6_FLAG]),
                               st.sampled_from([("10.0.0.7", 5555), ("2001:db8::1", 7)]),
                               st.sampled_from(["T", "Tö"]), st.integers(0, 3),
                               st.integers(-(1 << 40), 1 << 40), st.booleans()),
                     min_size=1, max_size=12),
    store_host=st.sampled_from([("127.0.0.1", 10911), ("::1", 10911)]),
)
def test_put_uniform_items_matches_python(batches, store_host) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        py = _commit_log(os.path.join(tmp, "py"), store_host)
        cy = _commit_log(os.path.join(tmp, "cy"), store_host)
        try:
            for cl in (py, cy):
                for host in (("10.0.0.7", 5555), ("2001:db8::1", 7)):
                    cl._born_entry(host)
                for topic in ("T", "Tö"):
                    tb = topic.encode()
                    cl._topic_fields[topic] = bytes((len(tb),)) + tb
            for n, (items, sys_flag, born_host, topic, queue_id, prepared, handoff) in enumerate(batches):
                for cl in (py, cy):
                    cl.handoff = deque() if handoff else None
                    cl._last_store_timestamp = 4_000_000_000_000 + n  # one clock for both (ahead of now)
                args = (topic, queue_id, sys_flag, 1_700_000_000_000 + n, born_host, n % 3, items, prepared)
                crcs_py: list[int] = []
                crcs_cy: list[int] = []
                with _uniform_passes(commit_log_module._py_layout_uniform, commit_log_module._py_write_uniform):
                    want = _outcome(py.put_uniform_items, *args, crcs_py)
                with _uniform_passes(_speedups_commitlog._layout_uniform, _speedups_commitlog._write_uniform):
                    got = _outcome(cy.put_uniform_items, *args, crcs_cy)
                if want[0] == "ok":
                    assert got[0] == "ok"
                    assert _state(cy, got[1]) == _state(py, want[1]), n
                else:
                    assert got == want, n
                assert crcs_cy == crcs_py
        finally:
            py.shutdown()
            cy.shutdown()


@pytest.mark.parametrize("store_host", [("127.0.0.1", 10911), ("::1", 10911)])
@pytest.mark.parametrize("born_host", [("10.0.0.7", 5555), ("2001:db8::1", 7)])
def test_a_send_batch_is_appended_by_the_compiled_code(tmp_path, monkeypatch, store_host, born_host) -> None:
    """The common case never falls back to the Python passes (which would hide a slow path)."""
    cl = _commit_log(str(tmp_path / "c"), store_host)
    try:
        cl.handoff = deque()
        cl._born_entry(born_host)
        cl._topic_fields["T"] = b"\x01T"
        items = [_send_batch_item(properties_to_string({"TAGS": "a", "KEYS": f"k{i}", "UNIQ_KEY": f"U{i}", "WAIT": "true"}),
                                  i, bytes([i]) * 1024) for i in range(32)]
        items.append((1, b"x", None, "TAGS\x01b\x02"))  # dispatch parses the string itself

        def fallback(*args):
            raise AssertionError("the Python pass ran")

        monkeypatch.setattr(commit_log_module, "_py_layout_uniform", fallback)
        monkeypatch.setattr(commit_log_module, "_py_write_uniform", fallback)
        monkeypatch.setattr(commit_log_module, "_layout_uniform", _speedups_commitlog._layout_uniform)
        monkeypatch.setattr(commit_log_module, "_write_uniform", _speedups_commitlog._write_uniform)
        result = cl.put_uniform_items("T", 1, 0, 1_700_000_000_000, born_host, 0, items)
        assert result is not None and result.append_message_result.msg_num == 33
        assert [r.uniq_key for r in cl.handoff] == [f"U{i}" for i in range(32)] + [None]
        assert cl.handoff[-1].properties == {"TAGS": "b"}
    finally:
        cl.shutdown()


# --- the two passes called directly with odd input ------------------------------------------

LAYOUT_ARGS = (100, 4096, 4096 + 64 * 1024, 60000)


@pytest.mark.parametrize("items", [
    [], (), [(0, b"b", None, "A\x01b\x02")], ((0, b"b", None, "A\x01b\x02"),),
    [(0, b"b", None, "A\x01b\x02", 9)], [[0, b"b", None, "A\x01b\x02"]], [(0, b"b", None)],
    [(0, b"b", None, b"A\x01b\x02")], [(0, b"b", None, "\ud800")], [(0, "str body", None, "")],
    [(0, bytearray(b"x"), {"A": "b"}, None)], [(True, b"b", None, "")], [(1 << 31, b"b", None, "")],
    [(0, b"b", {"A": "b", "N": None}, None)], [(0, b"b", {}, None)], [(0, b"b" * 5000, None, "")],
    [(0, b"b", None, "é" * 20000)], [(0, b"b", None, "x" * 32767)], [(0, b"b", None, "x" * 32768)],
    [(0, b"b", {"A": 1}, None)], [(0, b"b", None, None)], [object()],
])
def test_layout_matches_python_on_odd_items(items) -> None:
    want = _outcome(commit_log_module._py_layout_uniform, items, *LAYOUT_ARGS)
    assert _outcome(_speedups_commitlog._layout_uniform, items, *LAYOUT_ARGS) == want


def _write_args(**change):
    recs, _ = commit_log_module._py_layout_uniform(
        [(5, b"body", {"TAGS": "t", "KEYS": "k"}, "TAGS\x01t\x02KEYS\x01k\x02"), (-3, b"", None, "UNIQ_KEY\x01u\x02"),
         (7, b"xyz", None, "")], commit_log_module._HEADER_STRUCTS[False][False].size + 2 + 2, 4096, 70000, 60000)
    args = dict(mm=bytearray(4096), start=10, base=1 << 20, recs=recs,
                hs=commit_log_module._HEADER_STRUCTS[False][False], topic="T", queue_id=3, sflag=0,
                born_ts=1_700_000_000_000, born_addr=b"\n\x00\x00\x07", born_port=5555, now=1_800_000_000_000,
                store_addr=b"\x7f\x00\x00\x01", store_port=10911, reconsume=0, prepared=0, topic_field=b"\x01T",
                prefix="7F00000100002A9F", qoff=4, counted=True, handoff=True)
    args.update(change)
    return args


@pytest.mark.parametrize("change", [
    {}, dict(counted=False), dict(handoff=False), dict(start=0), dict(start=4000), dict(start=-1),
    dict(mm=bytes(4096)), dict(mm=memoryview(bytearray(4096))), dict(store_port=1 << 31), dict(store_port=True),
    dict(queue_id=-(1 << 31) - 1), dict(born_ts=1 << 63), dict(prepared=-(1 << 63)), dict(now="x"),
    dict(born_addr=b"\x01\x02\x03"), dict(hs=commit_log_module._HEADER_STRUCTS[True][False]),
    dict(born_addr=b"\x00" * 16, hs=commit_log_module._HEADER_STRUCTS[True][False]), dict(prefix="é"),
    dict(base=-5), dict(qoff=1 << 63), dict(recs=[]), dict(recs=()), dict(topic_field=b"\x02TT"),
])
def test_write_matches_python_on_odd_arguments(change) -> None:
    py_args = _write_args(**change)
    cy_args = _write_args(**change)
    want = _outcome(commit_log_module._py_write_uniform, *py_args.values())
    got = _outcome(_speedups_commitlog._write_uniform, *cy_args.values())
    if want[0] == "ok":
        assert got[0] == "ok"
        pos, qoff, ids, offsets, requests = want[1]
        assert got[1][:4] == (pos, qoff, ids, offsets)
        assert [astuple(r) for r in got[1][4]] == [astuple(r) for r in requests]
    else:
        assert got == want
    assert bytes(cy_args["mm"]) == bytes(py_args["mm"])
