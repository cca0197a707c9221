"""The revive-log codecs' direct formatting and fast parsing give exactly what the general
(json.dumps of a dict, field-by-field lookup) code gives for the same values."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from orbitmq.broker.pop.checkpoint import AckMsg, BatchAckMsg, PopCheckPoint, RevivePayloadError
from orbitmq.common.message import string_to_properties

NAMES = ["TopicA", "%RETRY%g_TopicA", "grp-1", "broker-a", "", 'q"uo\\te', "värde ✓", "ctl\x01\x02\n\t"]


def _generic(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _ck_dict(ck: PopCheckPoint) -> dict[str, Any]:
    obj: dict[str, Any] = {"so": ck.start_offset, "pt": ck.pop_time, "it": ck.invisible_time, "bm": ck.bit_map,
                           "n": ck.num, "q": ck.queue_id, "t": ck.topic, "c": ck.cid, "ro": ck.revive_offset,
                           "d": list(ck.queue_offset_diff), "bn": ck.broker_name}
    if ck.re_put_times is not None:
        obj["rp"] = ck.re_put_times
    return obj


def _base(a: AckMsg) -> dict[str, Any]:
    return {"so": a.start_offset, "c": a.consumer_group, "t": a.topic, "q": a.queue_id, "pt": a.pop_time,
            "bn": a.broker_name}


@pytest.mark.parametrize(("topic", "group", "broker"), list(itertools.product(NAMES, NAMES[:4] + NAMES[5:], NAMES[3:])))
def test_checkpoint_and_ack_json_match_json_dumps(topic: str, group: str, broker: str) -> None:
    for diff, rp in (([0, 1, 5], None), ([], "2"), ([7], 'x"y'), ([0, 2**40], None)):
        ck = PopCheckPoint(start_offset=2**40, pop_time=1700000000123, invisible_time=30000, num=len(diff) or 3,
                           queue_id=3, topic=topic, cid=group, broker_name=broker, bit_map=-1, revive_offset=-7,
                           queue_offset_diff=diff, re_put_times=rp)
        assert ck.to_json() == _generic(_ck_dict(ck))
        back = PopCheckPoint.from_json(ck.to_json())
        assert back == PopCheckPoint._from_dict(json.loads(ck.to_json()))
        assert back == ck
    ack = AckMsg(ack_offset=12, start_offset=10, consumer_group=group, topic=topic, queue_id=0, pop_time=-1,
                 broker_name=broker)
    assert ack.to_json() == _generic({"ao": 12, **_base(ack)})
    assert AckMsg.from_json(ack.to_json()) == ack
    back_ack = BatchAckMsg(ack_offset=-1, start_offset=10, consumer_group=group, topic=topic, queue_id=1,
                           pop_time=5, broker_name=broker, ack_offset_list=[10, 11, 2**33])
    assert back_ack.to_json() == _generic({"aol": [10, 11, 2**33], "ao": -1, **_base(back_ack)})
    assert BatchAckMsg.from_json(back_ack.to_json()) == back_ack


def test_unusual_field_types_take_the_general_encoder() -> None:
    ck = PopCheckPoint(start_offset=True, pop_time=1, invisible_time=2, num=1, queue_id=0, topic="T", cid="G",
                       queue_offset_diff=(0,), re_put_times=3)  # type: ignore[arg-type]
    assert ck.to_json() == _generic(_ck_dict(ck))
    ack = AckMsg(ack_offset=False, start_offset=1, consumer_group="G", topic="T", queue_id=0,  # type: ignore[arg-type]
                 pop_time=1)
    assert ack.to_json() == _generic({"ao": False, **_base(ack)})
    bat = BatchAckMsg(ack_offset=-1, start_offset=1, consumer_group="G", topic="T", queue_id=0, pop_time=1,
                      ack_offset_list=[1, True])
    assert bat.to_json() == _generic({"aol": [1, True], "ao": -1, **_base(bat)})


CK_BODIES = [
    '{"so":1,"pt":2,"it":3,"bm":0,"n":2,"q":0,"t":"T","c":"G","ro":0,"d":[0,1],"bn":"b"}',
    '{"so":"1","pt":2,"it":3,"bm":0,"n":2,"q":0,"t":"T","c":"G","ro":0,"d":[0,1],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":2,"q":0,"t":"T","c":"G","ro":0,"d":[0,1],"bn":null}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":2,"q":0,"t":7,"c":"G","ro":0,"d":[0,1],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":3,"q":0,"t":"T","c":"G","ro":0,"d":[0,1],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":65,"q":0,"t":"T","c":"G","ro":0,"d":[],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":1,"q":0,"t":"T","c":"G","ro":0,"d":[true],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":1,"q":0,"t":"T","c":"G","ro":0,"d":null,"bn":"b","rp":5}',
    '{"startOffset":1,"pt":2,"it":3,"bm":0,"n":1,"q":0,"t":"T","c":"G","ro":0,"d":[0],"bn":"b"}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":1,"q":0,"t":"T","c":"G","ro":0,"d":[0],"bn":"b","x":1}',
    '{"so":1,"pt":2,"it":3,"bm":0,"n":-1,"q":0,"t":"T","c":"G","ro":0,"d":[],"bn":"b"}',
]
ACK_BODIES = [
    '{"ao":1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b"}',
    '{"ao":true,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b"}',
    '{"ao":1,"so":1,"c":"G","t":"T","q":"0","pt":2,"bn":"b"}',
    '{"ao":1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":null}',
    '{"ao":1,"so":1,"c":"G","t":"T","q":0,"pt":2,"brokerName":"x"}',
    '{"aol":[1,2],"ao":-1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b"}',
    '{"aol":[1,2],"ao":-1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b","z":0}',
    '{"aol":[1,"2"],"ao":-1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b"}',
    '{"aol":[1,2],"ax":-1,"so":1,"c":"G","t":"T","q":0,"pt":2,"bn":"b"}',
]


def _outcome(fn: Any, body: str) -> Any:
    try:
        return fn(body)
    except RevivePayloadError as exc:
        return ("error", str(exc))


@pytest.mark.parametrize("body", CK_BODIES)
def test_checkpoint_fast_parse_agrees_with_the_general_parse(body: str) -> None:
    def general(text: str) -> Any:
        ck = PopCheckPoint._from_dict(json.loads(text))
        return ck
    assert _outcome(PopCheckPoint.from_json, body) == _outcome(general, body)


@pytest.mark.parametrize("body", ACK_BODIES)
def test_ack_fast_parse_agrees_with_the_general_parse(body: str) -> None:
    from orbitmq.broker.pop import checkpoint as c

    def general_ack(text: str) -> Any:
        d = json.loads(text)
        return AckMsg(ack_offset=c._get(d, "ao", "ackOffset", int), **c._common(d))

    def general_batch(text: str) -> Any:
        d = json.loads(text)
        offsets = d.get("aol", d.get("ackOffsetList"))
        if not isinstance(offsets, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in offsets):
            raise RevivePayloadError("field 'aol' is not a list of integers")
        return BatchAckMsg(ack_offset=-1, ack_offset_list=list(offsets), **c._common(d))

    assert _outcome(AckMsg.from_json, body) == _outcome(general_ack, body)
    assert _outcome(BatchAckMsg.from_json, body) == _outcome(general_batch, body)


def test_revive_log_properties_are_properties_to_string() -> None:
    from orbitmq.broker.pop.revive_log import ReviveLogWriter
    from orbitmq.common.message import properties_to_string

    class _Cfg:
        broker_ip1 = "127.0.0.1"
        listen_port = 10911

    class _Broker:
        config = _Cfg()

        @staticmethod
        def now_ms() -> int:
            return 1

    class _Pop:
        broker = _Broker()
        revive_topic = "rmq_sys_REVIVE_LOG_C"

    writer = ReviveLogWriter(_Pop())  # type: ignore[arg-type]
    for tag, key in (("ck", "T@0@1@G@2@b@ck"), ("bAck", "T@0@[1, 2]@G@2@bAck"), ("ck", "odd\x01key\x02")):
        msg = writer._message(3, b"{}", tag, key, 99)
        assert msg.properties_string == properties_to_string(msg.properties)
        if msg.parsed_properties is not None:
            assert msg.parsed_properties[0] is msg.properties_string
            assert msg.parsed_properties[1] == string_to_properties(msg.properties_string)
            assert msg.parsed_properties[1] is not msg.properties
