"""How `orbitmq admin` prints: aligned tables for people, JSON for scripts, progress lines on
stderr (stdout stays the command's output) and the files some commands write."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from orbitmq.common.message import MessageExt


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """mqadmin-style columns ("#Topic  #QID …"), each as wide as its widest cell."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip() for r in cells]
    return "\n".join(lines)


def render_pairs(pairs: Sequence[tuple[str, Any]], width: int = 20) -> str:
    return "\n".join(f"{name:<{width}} {'' if value is None else value}".rstrip() for name, value in pairs)


def format_timestamp(ms: int) -> str:
    """yyyy-MM-dd HH:mm:ss,SSS in local time; "-" for an unknown (<= 0) time."""
    if ms <= 0:
        return "-"
    moment = dt.datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def config_lines(props: dict[str, str]) -> list[str]:
    """getBrokerConfig's and getNamesrvConfig's "key  =  value" lines."""
    return [f"{k:<50}=  {v}" for k, v in props.items()]


def progress(text: str) -> None:
    """One progress line for a long-running command (stderr: stdout is its output)."""
    print(text, file=sys.stderr, flush=True)


def write_file(path: str, data: bytes) -> str:
    """A CLI-side file (the admin process, not a server loop), its directory made as needed."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)
    return path


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def body_text(body: bytes) -> tuple[str, str]:
    """(encoding, text): the body as UTF-8 when it is, base64 otherwise."""
    try:
        return "utf-8", body.decode("utf-8")
    except UnicodeDecodeError:
        return "base64", base64.b64encode(body).decode("ascii")


def message_to_json(msg: MessageExt) -> dict[str, Any]:
    encoding, text = body_text(msg.body)
    return {
        "msgId": msg.uniq_id_or_msg_id, "offsetMsgId": msg.msg_id, "topic": msg.topic, "tags": msg.tags,
        "keys": msg.keys, "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset, "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp, "storeTimestamp": msg.store_timestamp, "bornHost": msg.born_host,
        "storeHost": msg.store_host, "sysFlag": msg.sys_flag, "bodyCRC": msg.body_crc, "storeSize": msg.store_size,
        "properties": dict(msg.properties), "bodyEncoding": encoding, "body": text,
    }


def render_message(msg: MessageExt) -> str:
    """QueryMsgByIdSubCommand's layout; the body is printed instead of saved to a file."""
    encoding, text = body_text(msg.body)
    return render_pairs([
        ("OffsetID:", msg.msg_id),
        ("MsgId:", msg.uniq_id_or_msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags or ''}]"),
        ("Keys:", f"[{' '.join(msg.keys)}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", format_timestamp(msg.born_timestamp)),
        ("Store Timestamp:", format_timestamp(msg.store_timestamp)),
        ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag),
        ("Properties:", json.dumps(dict(msg.properties), ensure_ascii=False)),
        (f"Message Body ({encoding}):", text),
    ])
