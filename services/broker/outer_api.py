"""The broker's calls to the NameServers (RocketMQ's BrokerOuterAPI).

Registration goes to EVERY NameServer in namesrvAddr concurrently: NameServers never talk to
each other, so one that misses a registration would route clients away from this broker
until the next period. A failing NameServer is logged and does not delay the others.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass
from typing import Any

from orbitmq.common.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigAndMappingSerializeWrapper,
)
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegisterBrokerResult:
    """REGISTER_BROKER's answer to a slave: the master's HA address and Remoting address
    (RegisterBrokerResponseHeader ``haServerAddr``/``masterAddr``; None for a master)."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


def body_crc32(body: bytes) -> int:
    """UtilAll.crc32: the CRC32 of the body, masked to a non-negative Java int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def _encode_register_body(wrapper: TopicConfigAndMappingSerializeWrapper) -> tuple[bytes, int]:
    body = RegisterBrokerBody(wrapper, []).encode(compress=False)
    return body, body_crc32(body)


class BrokerOuterAPI:
    def __init__(self, timeout_millis: int = 24000) -> None:
        self.timeout = timeout_millis / 1000.0
        self.client = RemotingClient()

    async def close(self) -> None:
        await self.client.close()

    async def register_broker_all(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                                  broker_name: str, broker_id: int, ha_server_addr: str,
                                  topic_configs: list[TopicConfig], data_version: dict[str, Any]
                                  ) -> dict[str, RegisterBrokerResult | None]:
        """Register with every NameServer; per address the result, or None when it failed."""
        wrapper = TopicConfigAndMappingSerializeWrapper(
            topic_config_table={tc.topic_name: tc for tc in topic_configs},
            data_version=DataVersion.from_json_dict(data_version))
        # The body is the whole topic table (tens of ms of JSON for thousands of topics, every
        # period and every metadata change): serialise it off the loop. TopicConfigs are
        # replaced, never mutated, in the table, so the list the caller took is a stable snapshot.
        body, crc = await asyncio.to_thread(_encode_register_body, wrapper)
        fields = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster_name,
                  "haServerAddr": ha_server_addr, "brokerId": str(broker_id), "compressed": "false",
                  "bodyCrc32": str(crc)}

        async def one(addr: str) -> RegisterBrokerResult | None:
            request = RemotingCommand.request(RequestCode.REGISTER_BROKER, dict(fields), body)
            try:
                response = await self.client.invoke(addr, request, self.timeout)
            except Exception as exc:
                log.warning("register broker to name server %s failed: %s", addr, exc)
                return None
            if response.code != ResponseCode.SUCCESS:
                log.warning("register broker to name server %s refused: code %s %s", addr, response.code,
                            response.remark)
                return None
            ext = response.ext_fields or {}
            return RegisterBrokerResult(ext.get("haServerAddr") or None, ext.get("masterAddr") or None)

        results = await asyncio.gather(*(one(a) for a in namesrv_addrs))
        return dict(zip(namesrv_addrs, results, strict=True))

    async def unregister_broker_all(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                                    broker_name: str, broker_id: int) -> None:
        fields = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster_name,
                  "brokerId": str(broker_id)}

        async def one(addr: str) -> None:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, dict(fields))
            try:
                response = await self.client.invoke(addr, request, min(self.timeout, 3.0))
                if response.code != ResponseCode.SUCCESS:
                    log.warning("unregister broker from %s refused: %s %s", addr, response.code, response.remark)
                else:
                    log.info("unregister broker from name server %s OK", addr)
            except Exception as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in namesrv_addrs))
