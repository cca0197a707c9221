"""decode_batch's all-at-once bounds check against _decode_checked (one field at a time): the
same tuples for every body, the same error text (it becomes the response remark) for every
malformed one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.processors.batch_codec import (
    BatchDecodeError,
    BatchItem,
    _decode_checked,
    decode_batch,
    encode_batch,
)


def _outcome(fn, data):
    try:
        return "ok", fn(data)
    except BatchDecodeError as exc:
        return "error", str(exc)


_ITEMS = st.lists(st.builds(BatchItem, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40),
                            st.text(max_size=20)), min_size=1, max_size=5)


@settings(max_examples=400, deadline=None)
@given(_ITEMS, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
       st.integers(0, 10_000))
def test_same_outcome_as_the_checked_decoder(items, flips, cut):
    data = bytearray(encode_batch(items))
    assert decode_batch(bytes(data)) == [tuple(item) for item in items]
    for where, value in flips:  # corrupt some bytes (sizes, lengths, UTF-8) and maybe truncate
        data[where % len(data)] = value
    if cut % 3 == 0:
        del data[cut % len(data):]
    assert _outcome(decode_batch, bytes(data)) == _outcome(_decode_checked, bytes(data))
    assert _outcome(decode_batch, bytearray(data)) == _outcome(_decode_checked, bytes(data))


def test_empty_and_short_bodies():
    for data in (b"", b"\x00", bytes(19), bytes(20), bytes(22), b"\x00\x00\x00\x16" + bytes(18)):
        assert _outcome(decode_batch, data) == _outcome(_decode_checked, data)
