"""SEND_BATCH_MESSAGE / SEND_MESSAGE_V2 store a canonical properties string as it came and
anything else re-encoded, so the stored bytes are always properties_to_string of the parsed dict
(what the broker wrote before it kept the incoming string); the checks answer as before."""

import random
import time
import types

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.processors.batch_codec import BatchItem, encode_batch
from orbitmq.broker.processors.send import SendMessageProcessor
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.common.message import parse_properties_exact, properties_to_string, string_to_properties
from orbitmq.common.message_codec import decode_record
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

PROPERTY_STRINGS = [
    "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02",   # canonical: stored as is
    "TAGS\x01a\x02KEYS\x01k",                            # no final separator
    "TAGS\x01a\x02\x02KEYS\x01k\x02",                    # an empty entry
    "TAGS\x01a\x02TAGS\x01b\x02",                        # a name twice
    "junk\x02TAGS\x01x\x02\x01v\x02",                    # entries without a name or separator
    "K\x01v\x01w\x02",                                   # a value holding the name separator
    "",
]


def test_parse_properties_exact_matches_the_tolerant_parser():
    rng = random.Random(7)
    alphabet = ["a", "b", "", "\x01", "\x02", "é"]
    for s in PROPERTY_STRINGS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
                                 for _ in range(20000)]:
        props, exact = parse_properties_exact(s)
        assert props == string_to_properties(s) and list(props) == list(string_to_properties(s))
        assert exact == (properties_to_string(props) == s)


@pytest.fixture
async def processor(tmp_path):
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"), message_index_enable=False)
    store = MessageStore(cfg)
    await store.start()
    topic_config = TopicConfig("T", 4, 4)
    broker = types.SimpleNamespace(
        config=types.SimpleNamespace(start_accept_send_request_time_stamp=0, broker_permission=6,
                                     broker_ip1="127.0.0.1", reject_transaction_message=False,
                                     region_id="DefaultRegion", trace_on=True),
        store_config=cfg, now_ms=lambda: int(time.time() * 1000),
        topic_config_manager=types.SimpleNamespace(select_topic_config=lambda t: topic_config),
        remote_addr=lambda channel: "127.0.0.1:50123", message_store=store,
        stats=types.SimpleNamespace(on_put=lambda *a: None), metrics=None)
    broker.new_inner_message = BrokerController.new_inner_message.__get__(broker)
    broker.new_batch_inner_messages = BrokerController.new_batch_inner_messages.__get__(broker)
    broker.put_messages = BrokerController.put_messages.__get__(broker)
    broker.put_batch = BrokerController.put_batch.__get__(broker)
    broker.put_message = BrokerController.put_message.__get__(broker)

    async def submit(run):
        return await run()

    broker.send_queue = types.SimpleNamespace(submit=submit)
    yield SendMessageProcessor(broker), store
    await store.shutdown()


def _header(queue_id: int, **extra: str) -> dict[str, str]:
    fields = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": "1", "h": "0",
              "i": "", "j": "0", "k": "false"}
    fields.update(extra)
    return fields


def _stored(store: MessageStore, queue_id: int):
    result = store.get_message("g", "T", queue_id, 0, 64)
    return [decode_record(bytes(r), 0, check_crc=True) for r in result.message_buffer_list]


async def test_batch_stores_exactly_what_re_encoding_would(processor):
    proc, store = processor
    items = [BatchItem(i, bytes([i]) * 10, s) for i, s in enumerate(PROPERTY_STRINGS)]
    req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, _header(1, m="true"), encode_batch(items))
    resp = await proc.process(req, None)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    store.reput_service.do_reput()
    stored = _stored(store, 1)
    assert len(stored) == len(items)
    for item, msg in zip(items, stored, strict=True):
        assert msg.body == item.body and msg.flag == item.flag
        assert msg.properties == string_to_properties(item.properties)
        record = store.commit_log.get_message(msg.commit_log_offset, msg.store_size)
        assert record.endswith(properties_to_string(string_to_properties(item.properties)).encode())


async def test_single_send_stores_exactly_what_re_encoding_would(processor):
    proc, store = processor
    for s in PROPERTY_STRINGS:
        req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, _header(2, i=s), b"body")
        resp = await proc.process(req, None)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    store.reput_service.do_reput()
    stored = _stored(store, 2)
    assert len(stored) == len(PROPERTY_STRINGS)
    for s, msg in zip(PROPERTY_STRINGS, stored, strict=True):
        record = store.commit_log.get_message(msg.commit_log_offset, msg.store_size)
        # plus the region and trace switch every single message is stamped with (5.x buildMsgContext),
        # and a message id where the client sent none (5.5.0's SendMessageProcessor#sendMessage)
        stamped = {**string_to_properties(s), "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        if not stamped.get("UNIQ_KEY"):
            given = decode_record(record).properties.get("UNIQ_KEY", "")
            assert len(given) == 32, given  # a fresh client-style id
            stamped["UNIQ_KEY"] = given  # an empty one is filled in place, a missing one appended
        assert record.endswith(properties_to_string(stamped).encode())


async def test_batch_checks_answer_as_before(processor):
    proc, _store = processor
    for props, remark in (("TRAN_MSG\x01true\x02", None), ("DELAY\x013\x02", "delay"), ("DELAY\x010\x02", "")):
        items = [BatchItem(0, b"x", "TAGS\x01a\x02"), BatchItem(0, b"y", props)]
        req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, _header(0, m="true"), encode_batch(items))
        resp = await proc.process(req, None)
        if remark is None:
            assert resp.code == ResponseCode.SUCCESS  # reject_transaction_message is off
        elif remark:
            assert resp.code == ResponseCode.MESSAGE_ILLEGAL and remark in resp.remark
        else:
            assert resp.code == ResponseCode.SUCCESS
    req = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, _header(0, m="true", f="4"),
                                  encode_batch([BatchItem(0, b"x", "TAGS\x01a\x02")]))
    resp = await proc.process(req, None)
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "transaction" in resp.remark
