"""Reading MessageQueue-keyed broker tables (fastjson's object-key maps) in the admin client."""

from __future__ import annotations

import pytest

from orbitmq.common.fastjson import loads, message_queue_pairs


def test_object_keys_become_pairs() -> None:
    body = ('{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":3},'
            '{"brokerName":"b","queueId":1,"topic":"t"}:{"brokerOffset":4}}}')
    parsed = loads(body)
    assert parsed["consumeTps"] == 1.5
    pairs = message_queue_pairs(parsed["offsetTable"])
    assert [(mq["queueId"], value["brokerOffset"]) for mq, value in pairs] == [(0, 3), (1, 4)]


def test_plain_json_and_bare_keys() -> None:
    assert loads(b'{"a":[1,true,null,"x"]}') == {"a": [1, True, None, "x"]}
    assert loads("{a:1, b:{}}") == {"a": 1, "b": {}}
    assert message_queue_pairs({'{"topic":"t","queueId":2}': 5, "junk": 1}) == [({"topic": "t", "queueId": 2}, 5)]


@pytest.mark.parametrize("bad", ["{", '{"a":}', "[1,", "{{}:1", '{"a":1} x', "[" * 100 + "{{}:1}" + "]" * 100])
def test_garbage_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        loads(bad)
