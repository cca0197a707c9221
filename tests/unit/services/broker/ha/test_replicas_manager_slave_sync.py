"""SlaveSynchronize over real Remoting (codes 21, 43, 45, 201) and the 1007/1008 processors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orbitmq.broker.ha.slave_synchronize import SlaveSynchronize
from orbitmq.broker.processors.replica import ReplicaProcessor
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from tests.support.broker import in_process_broker


async def test_slave_copies_topics_groups_consumer_and_delay_offsets(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "m", "C", "b") as master, \
            in_process_broker(tmp_path / "s", "C", "b") as slave:
        await master.topic_config_manager.update_topic_config(TopicConfig("OrderTopic", 6, 6))
        await master.subscription_group_manager.update_subscription_group_config(SubscriptionGroupConfig("G1"))
        master.consumer_offset_manager.commit_offset("G1", "OrderTopic", 3, 42)
        master.schedule_message_service.offsets.update(2, 17)
        # A topic the slave has but the master deleted goes away with the copy.
        await slave.topic_config_manager.update_topic_config(TopicConfig("Stale", 1, 1))

        sync = SlaveSynchronize(slave)
        sync.master_addr = master.config.broker_addr
        try:
            assert await sync.sync_all()
        finally:
            await sync.shutdown()
        assert slave.topic_config_manager.select_topic_config("OrderTopic").read_queue_nums == 6
        assert slave.topic_config_manager.select_topic_config("Stale") is None
        assert slave.topic_config_manager.data_version == master.topic_config_manager.data_version
        assert slave.subscription_group_manager.get("G1") is not None
        assert slave.consumer_offset_manager.query_offset("G1", "OrderTopic", 3) == 42
        assert slave.schedule_message_service.offsets.get(2) == 17
        # Persisted, so a promoted slave restarting keeps them.
        saved = json.loads((tmp_path / "s" / "config" / "consumerOffset.json").read_text())
        assert saved["offsetTable"]["OrderTopic@G1"] == {"3": 42}


async def test_sync_all_reports_an_unreachable_master(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "s", "C", "b") as slave:
        sync = SlaveSynchronize(slave)
        sync.master_addr = "127.0.0.1:1"
        try:
            assert not await sync.sync_all()
        finally:
            await sync.shutdown()


class _Entry:
    def __init__(self, epoch: int, start: int, end: int) -> None:
        self.epoch, self.start_offset, self.end_offset = epoch, start, end


class _FakeManager:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def change_broker_role(self, *args: Any) -> bool:
        self.calls.append(args)
        return True


async def test_epoch_cache_and_role_notification_processors(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "b", "C", "b") as broker:
        client = RemotingClient()
        try:
            # Classic mode: both requests are refused with SYSTEM_ERROR, the server keeps serving.
            response = await client.invoke(broker.config.broker_addr,
                                           RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
            assert response.code == ResponseCode.SYSTEM_ERROR and "controllerMode" in response.remark

            manager = _FakeManager()
            broker.config.enable_controller_mode = True
            broker.replicas_manager = manager

            class _Cache:
                def all_entries(self) -> list[_Entry]:
                    return [_Entry(1, 0, 100), _Entry(2, 100, 2**63 - 1)]

            broker.epoch_cache = _Cache()
            response = await client.invoke(broker.config.broker_addr,
                                           RemotingCommand.request(RequestCode.GET_BROKER_EPOCH_CACHE))
            assert response.code == ResponseCode.SUCCESS
            body = json.loads(response.body)
            assert body["clusterName"] == "C" and body["brokerName"] == "b" and body["brokerId"] == 0
            assert body["epochList"] == [{"epoch": 1, "startOffset": 0, "endOffset": 100},
                                         {"epoch": 2, "startOffset": 100, "endOffset": 2**63 - 1}]
            assert body["maxOffset"] == broker.message_store.get_max_phy_offset()

            request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, {
                "masterAddress": "127.0.0.1:9", "masterEpoch": "4", "syncStateSetEpoch": "6",
                "masterBrokerId": "2"}, b'{"syncStateSet":[2,3],"syncStateSetEpoch":6}')
            response = await client.invoke(broker.config.broker_addr, request)
            assert response.code == ResponseCode.SUCCESS
            assert manager.calls == [(2, "127.0.0.1:9", 4, 6, {2, 3})]
            # A malformed header is answered, not fatal.
            bad = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, {"masterEpoch": "x"})
            response = await client.invoke(broker.config.broker_addr, bad)
            assert response.code == ResponseCode.SYSTEM_ERROR
            broker.replicas_manager = None
            broker.config.enable_controller_mode = False
        finally:
            await client.close()


def test_processor_registers_the_replication_codes() -> None:
    registered: dict[int, Any] = {}

    class _Broker:
        def register_processor(self, code: int, processor: Any) -> None:
            registered[int(code)] = processor

    ReplicaProcessor(_Broker()).register()  # type: ignore[arg-type]
    assert set(registered) == {RequestCode.GET_BROKER_HA_STATUS, RequestCode.GET_BROKER_EPOCH_CACHE,
                               RequestCode.NOTIFY_BROKER_ROLE_CHANGED}
