"""argparse value types and flags that several `orbitmq admin` commands share, read as mqadmin
reads them (true/false, timestamps, charsets)."""

from __future__ import annotations

import argparse
import codecs
import datetime as dt
import time


def bool_type(text: str) -> bool:
    """mqadmin's true/false flags; anything else is refused (Boolean.parseBoolean reads it as false)."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered == "true"


def timestamp_type(text: str) -> int:
    """resetOffsetByTime -s: milliseconds, "now", or yyyy-MM-dd#HH:mm:ss:SSS as mqadmin takes."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = dt.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad timestamp {text!r}: use milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp() * 1000)


def target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="create/delete on this broker (ip:port)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="create/delete on every master of this cluster")


def charset_type(text: str) -> str:
    """A charset name (-c/-f of printMsg, queryMsgById) as Python's codec of it."""
    try:
        return codecs.lookup(text.strip()).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {text!r}") from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value
