"""RegisterBodyEncoder (services/broker/outer_api.py): whole-table REGISTER_BROKER bodies built
from per-topic text kept between registrations are byte for byte RegisterBrokerBody's."""

from __future__ import annotations

from orbitmq.broker.outer_api import RegisterBodyEncoder, _encode_register_body
from orbitmq.common.route import DataVersion, RegisterBrokerBody, TopicConfigAndMappingSerializeWrapper
from orbitmq.common.topic_config import TopicConfig


def _wrapper(table: dict[str, TopicConfig], counter: int) -> TopicConfigAndMappingSerializeWrapper:
    return TopicConfigAndMappingSerializeWrapper(topic_config_table=dict(table),
                                                 data_version=DataVersion(0, 1700000000000, counter))


def test_cached_bodies_are_the_plain_encoding() -> None:
    table = {f"T{i}": TopicConfig(f"T{i}", read_queue_nums=i % 7 + 1, write_queue_nums=4) for i in range(50)}
    table["Fifo-é"] = TopicConfig("Fifo-é", attributes={"message.type": "FIFO"}, order=True)
    encoder = RegisterBodyEncoder()
    for counter in (1, 2):  # the second time every topic's text comes from the cache
        wrapper = _wrapper(table, counter)
        assert encoder.encode(wrapper, whole=True) == _encode_register_body(wrapper)
    table["T3"] = TopicConfig("T3", read_queue_nums=16, write_queue_nums=16)  # replaced: encoded anew
    del table["T4"]
    wrapper = _wrapper(table, 3)
    body, _crc = encoder.encode(wrapper, whole=True)
    assert body == _encode_register_body(wrapper)[0]
    decoded = RegisterBrokerBody.decode(body).topic_config_serialize_wrapper
    assert decoded.topic_config_table["T3"].read_queue_nums == 16 and "T4" not in decoded.topic_config_table
    assert decoded.data_version.counter == 3
    chunk = _wrapper({"T1": table["T1"], "T2": table["T2"]}, 3)  # a split registration's chunk
    assert encoder.encode(chunk, whole=False) == _encode_register_body(chunk)
    empty = _wrapper({}, 3)  # upstream's last chunk may hold nothing
    assert encoder.encode(empty, whole=False) == _encode_register_body(empty)
