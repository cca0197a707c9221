"""Valid CommitLog records for the fuzz seeds: the mutator starts from real layouts."""

from __future__ import annotations

from orbitmq.common.message_codec import encode_blank, encode_record


def sample_records() -> list[bytes]:
    one = encode_record(topic="T", queue_id=1, body=b"hello", properties={"KEYS": "k", "TAGS": "t",
                                                                         "UNIQ_KEY": "AB"})
    two = encode_record(topic="SCHEDULE_TOPIC_XXXX", queue_id=0, body=b"x" * 40, physical_offset=len(one),
                        properties={"DELAY": "3"})
    v6 = encode_record(topic="T6", queue_id=2, body=b"", born_host=("::1", 5), store_host=("::1", 10911))
    return [one, one + two, one + two + encode_blank(64) + b"\0" * 56, v6]
