"""Remoting frame codec: byte-exact layouts, flags, codes, header dataclasses."""

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.common import sysflag
from orbitmq.remoting import (
    LanguageCode,
    RemotingCommand,
    RemotingCommandError,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from orbitmq.remoting import headers as h
from orbitmq.remoting.headers import decode_send_request_header


def _known_command(serialize_type: SerializeType) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.SEND_MESSAGE, language=LanguageCode.JAVA, version=479,
                           opaque=7, flag=0, remark="hi", ext_fields={"topic": "T", "queueId": "3"},
                           body=b"\x01\x02", serialize_type=serialize_type)


def test_json_frame_is_byte_exact():
    header = (b'{"code":10,"extFields":{"topic":"T","queueId":"3"},"flag":0,"language":"JAVA",'
              b'"opaque":7,"remark":"hi","serializeTypeCurrentRPC":"JSON","version":479}')
    expected = struct.pack(">ii", 4 + len(header) + 2, len(header)) + header + b"\x01\x02"
    cmd = _known_command(SerializeType.JSON)
    assert cmd.encode() == expected
    assert RemotingCommand.decode(expected[4:]) == cmd


def test_rocketmq_binary_frame_is_byte_exact():
    header = (
        b"\x00\x0a"            # code short 10
        + b"\x00"              # language JAVA
        + b"\x01\xdf"          # version short 479
        + b"\x00\x00\x00\x07"  # opaque
        + b"\x00\x00\x00\x00"  # flag
        + b"\x00\x00\x00\x02hi"  # remark
        + b"\x00\x00\x00\x1a"  # extFields length 26
        + b"\x00\x05topic" + b"\x00\x00\x00\x01T"
        + b"\x00\x07queueId" + b"\x00\x00\x00\x013"
    )
    assert len(header) == 2 + 1 + 2 + 4 + 4 + 4 + 2 + 4 + 26
    expected = struct.pack(">ii", 4 + len(header) + 2, (1 << 24) | len(header)) + header + b"\x01\x02"
    cmd = _known_command(SerializeType.ROCKETMQ)
    assert cmd.encode() == expected
    assert RemotingCommand.decode(expected[4:]) == cmd


def test_binary_header_without_remark_and_ext_fields():
    cmd = RemotingCommand(code=0, language=LanguageCode.PYTHON, version=1, opaque=-5, flag=1,
                          serialize_type=SerializeType.ROCKETMQ)
    frame = cmd.encode()
    assert frame[8:] == b"\x00\x00\x03\x00\x01\xff\xff\xff\xfb\x00\x00\x00\x01" + b"\x00" * 8
    decoded = RemotingCommand.decode(frame[4:])
    assert decoded == cmd and decoded.is_response and decoded.remark is None


def test_json_decode_accepts_java_rendering_and_defaults():
    header = b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"GO","opaque":9,"version":1}'
    frame = struct.pack(">i", len(header)) + header
    cmd = RemotingCommand.decode(frame)
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.language is LanguageCode.GO and cmd.ext_fields == {"topic": "T"} and cmd.body == b""


def test_flags_and_constructors():
    req = RemotingCommand.request(RequestCode.HEART_BEAT, {"k": "v"}, b"body")
    nxt = RemotingCommand.request(RequestCode.HEART_BEAT)
    assert nxt.opaque != req.opaque
    assert not req.is_response and not req.is_oneway and req.flag == 0
    req.mark_oneway()
    assert req.is_oneway and req.flag == 2
    resp = RemotingCommand.response(ResponseCode.SUCCESS, "ok", opaque=req.opaque)
    assert resp.is_response and resp.flag == 1 and resp.opaque == req.opaque
    bin_req = RemotingCommand.request(RequestCode.PULL_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    reply = bin_req.response_to(ResponseCode.PULL_NOT_FOUND)
    assert reply.serialize_type is SerializeType.ROCKETMQ and reply.opaque == bin_req.opaque


def test_codes_match_upstream_numbers():
    assert RequestCode.SEND_MESSAGE == 10 and RequestCode.SEND_MESSAGE_V2 == 310
    assert RequestCode.SEND_BATCH_MESSAGE == 320 and RequestCode.HEART_BEAT == 34
    assert RequestCode.RESET_CONSUMER_CLIENT_OFFSET == 220
    assert RequestCode.INVOKE_BROKER_TO_RESET_OFFSET == 222
    assert RequestCode.QUERY_TOPIC_CONSUME_BY_WHO == 300 and RequestCode.GET_TOPICS_BY_CLUSTER == 224
    assert RequestCode.POP_MESSAGE == 200050 and RequestCode.NOTIFICATION == 200054
    assert RequestCode.BATCH_ACK_MESSAGE == 200151 and RequestCode.GET_BROKER_EPOCH_CACHE == 1007
    assert RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET == 1001 and RequestCode.BROKER_HEARTBEAT == 904
    assert ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3 and ResponseCode.TRANSACTION_FAILED == 4
    assert ResponseCode.PULL_OFFSET_MOVED == 21 and ResponseCode.NO_MESSAGE == 208
    assert ResponseCode.POLLING_FULL == 209 and ResponseCode.POLLING_TIMEOUT == 210
    assert ResponseCode.TRANSACTION_SHOULD_COMMIT == 200 and ResponseCode.NOT_IN_CURRENT_UNIT == 205


def test_sysflags():
    assert sysflag.TRANSACTION_ROLLBACK_TYPE == 0xC and sysflag.NEED_UNWRAP_FLAG == 0x40
    assert sysflag.get_transaction_value(sysflag.TRANSACTION_PREPARED_TYPE | sysflag.COMPRESSED_FLAG) == 4
    flag = sysflag.reset_transaction_value(sysflag.TRANSACTION_PREPARED_TYPE | 1, sysflag.TRANSACTION_COMMIT_TYPE)
    assert flag == 0x9
    pull = sysflag.build_pull_sys_flag(True, True, True, False)
    assert pull == 7 and sysflag.has_suspend_flag(pull) and not sysflag.has_class_filter_flag(pull)
    assert sysflag.clear_commit_offset_flag(pull) == 6


@pytest.mark.parametrize("frame, needle", [
    (b"\x00\x00", "too short"),
    (struct.pack(">i", 50) + b"{}", "header length"),
    (struct.pack(">i", (7 << 24) | 2) + b"{}", "serialize type"),
    (struct.pack(">i", 3) + b"{x}", "JSON"),
    (struct.pack(">i", 2) + b"[]", "not an object"),
    (struct.pack(">i", (1 << 24) | 5) + b"\x00" * 5, "truncated"),
    (struct.pack(">i", (1 << 24) | 21) + b"\x00" * 13 + b"\x7f\xff\xff\xff" + b"\x00" * 4, "remark length"),
    (struct.pack(">i", (1 << 24) | 21) + b"\x00" * 17 + b"\x7f\xff\xff\xff", "extFields length"),
    (struct.pack(">i", (1 << 24) | 19) + b"\x00\x00\x63" + b"\x00" * 16, "language"),
])
def test_malformed_frames_raise_command_error(frame, needle):
    with pytest.raises(RemotingCommandError, match=needle):
        RemotingCommand.decode(frame)


def test_binary_refuses_codes_that_do_not_fit_a_short():
    cmd = RemotingCommand.request(RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(RemotingCommandError, match="short"):
        cmd.encode()


_text = st.text(max_size=20)
_ext = st.dictionaries(st.text(max_size=12), st.text(max_size=30), max_size=6)


@st.composite
def _commands(draw, serialize_type):
    short = st.integers(-32768, 32767)
    int32 = st.integers(-(2**31), 2**31 - 1)
    return RemotingCommand(
        code=draw(short if serialize_type is SerializeType.ROCKETMQ else int32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(short if serialize_type is SerializeType.ROCKETMQ else int32),
        opaque=draw(int32), flag=draw(int32),
        # the binary layout writes an empty remark as "absent", so generate None or non-empty
        remark=draw(st.none() | st.text(min_size=1, max_size=40)),
        ext_fields=draw(_ext), body=draw(st.binary(max_size=64)), serialize_type=serialize_type)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SerializeType).flatmap(_commands))
def test_any_command_round_trips(cmd):
    frame = cmd.encode()
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert RemotingCommand.decode(frame[4:]) == cmd


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_never_raises_anything_but_command_error(data):
    try:
        RemotingCommand.decode(data)
    except RemotingCommandError:
        pass


def _header_strategy(cls):
    kinds = {"str": st.text(max_size=15), "int": st.integers(-(2**63), 2**63 - 1), "bool": st.booleans()}
    fields = {}
    for f in dataclasses.fields(cls):
        strat = kinds[f.metadata["orbitmq.kind"].__name__]
        required = f.default is dataclasses.MISSING
        fields[f.name] = strat if required else st.none() | strat
    return st.builds(cls, **fields)


@pytest.mark.parametrize("cls", h.ALL_HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_headers_round_trip_through_ext_fields(cls, data):
    header = data.draw(_header_strategy(cls))
    ext = header.to_ext_fields()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())
    decoded = cls.from_ext_fields(ext)
    # None for an optional field with a default means "absent", which decodes to the default
    expected = {f.name: (f.default if getattr(header, f.name) is None and f.default is not dataclasses.MISSING
                         else getattr(header, f.name)) for f in dataclasses.fields(cls)}
    assert dataclasses.asdict(decoded) == expected


def _send_header(**overrides):
    values = dict(producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=4,
                  queue_id=2, sys_flag=0, born_timestamp=1700000000000, flag=0, properties="a\x01b\x02",
                  reconsume_times=0, unit_mode=False, batch=False, max_reconsume_times=16, broker_name="b1")
    values.update(overrides)
    return h.SendMessageRequestHeader(**values)


def test_send_header_v2_short_names_and_conversion():
    v1 = _send_header()
    v2 = v1.to_v2()
    assert v2.to_ext_fields() == {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0",
                                  "g": "1700000000000", "h": "0", "i": "a\x01b\x02", "j": "0",
                                  "k": "false", "l": "16", "m": "false", "n": "b1"}
    assert v2.to_v1() == v1
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, v2.to_ext_fields())
    assert decode_send_request_header(req) == v1
    req_v1 = RemotingCommand.request(RequestCode.SEND_MESSAGE, v1.to_ext_fields())
    assert req_v1.ext_fields["producerGroup"] == "PG" and req_v1.ext_fields["bname"] == "b1"
    assert decode_send_request_header(req_v1) == v1


def test_header_errors_name_the_field():
    ext = _send_header().to_ext_fields()
    del ext["topic"]
    with pytest.raises(RemotingCommandError, match="<topic> is null"):
        h.SendMessageRequestHeader.from_ext_fields(ext)
    ext = h.PullMessageRequestHeader(
        consumer_group="G", topic="T", queue_id=0, queue_offset=5, max_msg_nums=32, sys_flag=3,
        commit_offset=0, suspend_timeout_millis=15000, sub_version=1).to_ext_fields()
    ext["queueOffset"] = "five"
    with pytest.raises(RemotingCommandError, match="<queueOffset> is not a number"):
        h.PullMessageRequestHeader.from_ext_fields(ext)


def test_header_defaults_and_java_boolean_parsing():
    got = h.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": "1"})
    assert got.committed is True
    got = h.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "T", "queueId": "1", "committed": "TRUE"})
    assert got.committed is True
    reset = h.ResetOffsetRequestHeader(group="G", topic="T", timestamp=1, is_force=True)
    assert reset.to_ext_fields() == {"group": "G", "topic": "T", "queueId": "-1", "timestamp": "1",
                                     "isForce": "true"}


def test_unencodable_values_raise_command_error():
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "\ud800"})
    with pytest.raises(RemotingCommandError):
        cmd.encode()
    cmd = RemotingCommand(code=1, opaque=2**31, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(RemotingCommandError):
        cmd.encode()
