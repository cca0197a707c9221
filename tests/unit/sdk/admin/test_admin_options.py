"""The argparse value types `orbitmq admin` commands share (orbitmq.admin.options)."""

from __future__ import annotations

import argparse
import datetime as dt
import time

import pytest

from orbitmq.admin.options import bool_type, charset_type, positive_int, target_options, timestamp_type


def test_bool_type_takes_true_and_false_only() -> None:
    assert bool_type(" TRUE ") is True
    assert bool_type("false") is False
    with pytest.raises(argparse.ArgumentTypeError):
        bool_type("yes")


def test_timestamp_type_takes_millis_now_and_mqadmins_format() -> None:
    assert timestamp_type("1700000000123") == 1700000000123
    assert timestamp_type("-1") == -1
    before = int(time.time() * 1000)
    assert before <= timestamp_type("now") <= int(time.time() * 1000)
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 6000)
    assert timestamp_type("2024-01-02#03:04:05:006") == int(moment.timestamp() * 1000)
    with pytest.raises(argparse.ArgumentTypeError):
        timestamp_type("yesterday")


def test_positive_int_and_charset_type() -> None:
    assert positive_int("3") == 3
    for bad in ("0", "-2", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_int(bad)
    assert charset_type(" UTF8 ") == "utf-8"
    with pytest.raises(argparse.ArgumentTypeError):
        charset_type("no-such-charset")


def test_target_options_parse_b_and_c() -> None:
    parser = argparse.ArgumentParser()
    target_options(parser)
    args = parser.parse_args(["-b", "127.0.0.1:10911", "-c", "DefaultCluster"])
    assert (args.broker_addr, args.cluster) == ("127.0.0.1:10911", "DefaultCluster")
