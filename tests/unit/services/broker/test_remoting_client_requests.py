"""What Apache's Java Remoting client needs from a broker beyond the basics (issue 23): the fast
server on listenPort - 2 (the VIP channel), CHECK_CLIENT_CONFIG, LITE_PULL_MESSAGE, and the region
and trace switch stamped on stored messages (5.x consumers skip trace records without them)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support.net import free_port_pair

TOPIC = "JavaClientT"
GROUP = "JavaClientG"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerController, MQClientAPI]]:
    port = free_port_pair()
    values = {"listenPort": str(port), "storePathRootDir": str(tmp_path), "namesrvAddr": "", "brokerIP1": "127.0.0.1",
              "brokerName": "broker-a", "mappedFileSizeCommitLog": str(4 * 1024 * 1024)}
    controller = BrokerController(BrokerConfig.from_mapping(values), MessageStoreConfig.from_mapping(values),
                                  listen_host="127.0.0.1")
    await controller.start()
    api = MQClientAPI(timeout=5)
    try:
        await api.create_topic(f"127.0.0.1:{port}", TopicConfig(TOPIC, 1, 1))
        yield controller, api
    finally:
        await api.close()
        await controller.shutdown()


FLAG_SUBSCRIPTION = 0x1 << 2  # PullSysFlag: the subscription comes with the pull (no heartbeat needed)
FLAG_LITE_PULL_MESSAGE = 0x1 << 4


def _pull_header(sys_flag: int = FLAG_SUBSCRIPTION) -> h.PullMessageRequestHeader:
    return h.PullMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=0,
                                      max_msg_nums=8, sys_flag=sys_flag, commit_offset=0, suspend_timeout_millis=0,
                                      subscription="*", sub_version=0, expression_type="TAG")


async def test_fast_server_serves_sends_but_not_pulls(broker: tuple[BrokerController, MQClientAPI]) -> None:
    controller, api = broker
    port = controller.config.listen_port
    fast = f"127.0.0.1:{port - 2}"
    assert controller.fast_remoting_server is not None and controller.fast_remoting_server.port == port - 2
    result = await api.send_message(fast, "broker-a", Message(TOPIC, b"over the VIP channel"), "P", 0)
    assert result.status.name == "SEND_OK" and result.offset_msg_id
    # BrokerController#registerProcessor: no pulls on the fast server
    response = await api.invoke(fast, RequestCode.PULL_MESSAGE, _pull_header())
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    # the main server serves PULL_MESSAGE and the lite pull consumer's LITE_PULL_MESSAGE alike
    for code, flag in ((RequestCode.PULL_MESSAGE, 0), (RequestCode.LITE_PULL_MESSAGE, FLAG_LITE_PULL_MESSAGE)):
        response = await api.invoke(f"127.0.0.1:{port}", code, _pull_header(FLAG_SUBSCRIPTION | flag))
        assert response.code == ResponseCode.SUCCESS, response.remark


async def test_stored_messages_carry_region_and_trace_switch(broker: tuple[BrokerController, MQClientAPI]) -> None:
    controller, api = broker
    addr = controller.config.broker_addr
    await api.send_message(addr, "broker-a", Message(TOPIC, b"traced", properties={"a": "1"}), "P", 0)
    pulled = await api.pull_message(addr, _pull_header())
    [msg] = pulled.messages
    assert msg.properties["MSG_REGION"] == "DefaultRegion" and msg.properties["TRACE_ON"] == "true"
    assert msg.properties["a"] == "1"


async def test_check_client_config(broker: tuple[BrokerController, MQClientAPI]) -> None:
    controller, api = broker
    addr = controller.config.broker_addr

    async def check(expression_type: str, expression: str) -> tuple[int, str | None]:
        body = {"clientId": "127.0.0.1@x", "group": GROUP, "subscriptionData": {
            "topic": TOPIC, "subString": expression, "expressionType": expression_type, "tagsSet": [],
            "codeSet": [], "subVersion": 0, "classFilterMode": False}}
        response = await api.invoke(addr, RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(body).encode())
        return response.code, response.remark

    assert (await check("TAG", "*"))[0] == ResponseCode.SUCCESS
    assert (await check("SQL92", "a > 5 AND b = 'x'"))[0] == ResponseCode.SUCCESS
    assert (await check("SQL92", "a >"))[0] == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    controller.config.enable_property_filter = False
    code, remark = await check("SQL92", "a > 5")
    assert code == ResponseCode.SYSTEM_ERROR and "does not support consumer to filter message by SQL92" in remark
