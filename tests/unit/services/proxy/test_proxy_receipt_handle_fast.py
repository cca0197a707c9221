"""ReceiptHandle.decode's one-split fast path gives what the field-by-field decode gives, errors included."""

from __future__ import annotations

import random

import pytest

from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle

HANDLES = [
    "0 1763769600000 60000 0 0 broker-a 3 123 98765",
    "0 1763769600000 60000 0 0 broker-a 3 123",
    "5 1763769600000 60000 999 1 broker-b 0 7 -1",
    "5 1763769600000 60000 2147483647 2 broker-b 0 7 1 extra",
    "+5 1763769600000 60000 1 0 b 0 7 1",
    "1_0 1763769600000 60000 1 0 b 0 7 1",
    "0 1 2 3 0  4 5",
    "0 1 2 3 0 b 4 -5 6",
    "0 1 2 2147483648 0 b 4 5 6",
    "0 1 2 -1 0 b 4 5 6",
    "-1 1 2 3 0 b 4 5 6",
    "0 -1 2 3 0 b 4 5 6",
    "0 1 -2 3 0 b 4 5 6",
    "0 1 2 3 0 b -4 5 6",
    "9223372036854775807 1 2 3 0 b 4 5 6",
    "9223372036854775808 1 2 3 0 b 4 5 6",
    "0 1 2 3 0 b 4 9223372036854775808 6",
    "0 1 2 3 0 b 4 -9223372036854775808 6",
    "0 1 2 3 0 b 4 -9223372036854775809 6",
    "0 1 2 3 3 b 4 5 6",
    "0 1 2 3 x b 4 5 6",
    "0 1 2 3 0 b 4 5 x",
    "0 1 2 3 0 b 4 x 6",
    "a 1 2 3 0 b 4 5 6",
    "0 1 2 3 0 b 4",
    "0 1 2 3 0 b",
    "0  1 2 3 0 b 4 5 6",
    "",
    "garbage",
    "0 1 2 3 0 b 4 5 99999999999999999999999",
    "٣ 1 2 3 0 b 4 5 6",
]


def _outcome(fn, raw):
    try:
        return ("ok", fn(raw))
    except InvalidReceiptHandle as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("raw", HANDLES)
def test_fast_decode_matches_checked_decode(raw: str) -> None:
    assert _outcome(ReceiptHandle.decode, raw) == _outcome(ReceiptHandle._decode_checked, raw)


def test_fast_decode_matches_on_random_handles() -> None:
    rng = random.Random(8)
    pieces = ["0", "1", "2", "-1", "999", "2147483647", "2147483648", "9223372036854775807",
              "9223372036854775808", "x", "", "broker-a", "+3", " "]
    for _ in range(3000):
        raw = " ".join(rng.choice(pieces) for _ in range(rng.randint(6, 10)))
        assert _outcome(ReceiptHandle.decode, raw) == _outcome(ReceiptHandle._decode_checked, raw), raw


@pytest.mark.parametrize("raw", [None, 5])
def test_non_string_refused(raw) -> None:
    with pytest.raises(InvalidReceiptHandle):
        ReceiptHandle.decode(raw)
