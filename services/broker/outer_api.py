"""The broker's calls to the NameServers (RocketMQ's BrokerOuterAPI).

Registration goes to EVERY NameServer in namesrvAddr concurrently: NameServers never talk to
each other, so one that misses a registration would route clients away from this broker
until the next period. A failing NameServer is logged and does not delay the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import zlib
from dataclasses import dataclass, replace
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


class RegisterBodyEncoder:
    """Whole-table REGISTER_BROKER bodies from each topic's JSON kept between registrations.

    TopicConfigs are replaced in the table, never changed in place, so a topic whose object is
    the one encoded last time reuses its text: a periodic registration of 100,000 topics joins
    strings instead of building and dumping 100,000 dicts. The bytes are RegisterBrokerBody's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[TopicConfig, str]] = {}

    def encode(self, wrapper: TopicConfigAndMappingSerializeWrapper, *, whole: bool) -> tuple[bytes, int]:
        """``whole``: the table is all the broker has (the cache keeps only its topics)."""
        with self._lock:
            cache = self._cache
            fresh: dict[str, tuple[TopicConfig, str]] = {}
            parts: list[str] = []
            for name, tc in wrapper.topic_config_table.items():
                hit = cache.get(name)
                if hit is None or hit[0] is not tc:
                    hit = (tc, json.dumps(name, ensure_ascii=False) + ":"
                           + json.dumps(tc.to_json_dict(), separators=(",", ":"), ensure_ascii=False))
                fresh[name] = hit
                parts.append(hit[1])
            if whole:
                self._cache = fresh
            else:
                cache.update(fresh)
        rest = json.dumps(replace(wrapper, topic_config_table={}).to_json_dict(), separators=(",", ":"),
                          ensure_ascii=False)
        head = '{"topicConfigTable":{}'
        if not rest.startswith(head):  # not the layout this was written for: the plain way
            return _encode_register_body(wrapper)
        text = ('{"topicConfigSerializeWrapper":{"topicConfigTable":{' + ",".join(parts) + "}"
                + rest[len(head):] + ',"filterServerList":[]}')
        body = text.encode("utf-8")
        return body, body_crc32(body)


class BrokerOuterAPI:
    def __init__(self, timeout_millis: int = 24000) -> None:
        self.timeout = timeout_millis / 1000.0
        self.client = RemotingClient()
        self.body_encoder = RegisterBodyEncoder()
        # Sent with every REGISTER_BROKER: enableActingMaster (always, as upstream: a broker that
        # omits it is an old-version broker to the NameServer) and, while acting master is on,
        # heartbeatTimeoutMillis (brokerNotActiveTimeoutMillis). Set by the BrokerController.
        self.register_fields: dict[str, str] = {}

    async def close(self) -> None:
        await self.client.close()

    async def register_broker_all(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                                  broker_name: str, broker_id: int, ha_server_addr: str,
                                  topic_configs: list[TopicConfig], data_version: dict[str, Any],
                                  split_size: int = 0) -> dict[str, RegisterBrokerResult | None]:
        """Register with every NameServer; per address the result, or None when it failed.

        ``split_size`` > 0 (enableSplitRegistration / splitRegistrationSize): the table goes in
        REGISTER_BROKERs of that many topics each, then one with the rest (possibly none), as
        BrokerController#registerBrokerAll does; every one carries the same dataVersion, and
        nothing marks a chunk as first or later (a NameServer adds each chunk's topics and
        removes none while deleteTopicWithBrokerRegistration is off, its default). An address
        whose any chunk failed is None in the result.
        """
        if split_size <= 0 or len(topic_configs) < split_size:
            return await self.register_topics(namesrv_addrs, cluster_name=cluster_name, broker_addr=broker_addr,
                                              broker_name=broker_name, broker_id=broker_id,
                                              ha_server_addr=ha_server_addr, topic_configs=topic_configs,
                                              data_version=data_version, whole=True)
        failed: set[str] = set()
        results: dict[str, RegisterBrokerResult | None] = {}
        chunks = [topic_configs[i:i + split_size] for i in range(0, len(topic_configs), split_size)]
        if len(chunks[-1]) == split_size:
            chunks.append([])  # upstream's last call carries what is left after the last full chunk
        log.info("register broker to name servers in %d chunks of %d topics (%d topics)", len(chunks), split_size,
                 len(topic_configs))
        for chunk in chunks:
            results = await self.register_topics(namesrv_addrs, cluster_name=cluster_name, broker_addr=broker_addr,
                                                 broker_name=broker_name, broker_id=broker_id,
                                                 ha_server_addr=ha_server_addr, topic_configs=chunk,
                                                 data_version=data_version, whole=False)
            failed.update(addr for addr, result in results.items() if result is None)
        return {addr: (None if addr in failed else result) for addr, result in results.items()}

    async def register_topics(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                              broker_name: str, broker_id: int, ha_server_addr: str,
                              topic_configs: list[TopicConfig], data_version: dict[str, Any],
                              whole: bool | None = None) -> dict[str, RegisterBrokerResult | None]:
        """One REGISTER_BROKER to every NameServer with these topics: the whole table, a chunk
        of it, or the few just changed (BrokerController#registerIncrementBrokerData; the same
        request, its table holding only those topics)."""
        wrapper = TopicConfigAndMappingSerializeWrapper(
            topic_config_table={tc.topic_name: tc for tc in topic_configs},
            data_version=DataVersion.from_json_dict(data_version))
        if whole is not None:
            # A whole table (or a chunk of one): off the loop, from the per-topic text kept
            # since the last one. TopicConfigs are replaced, never mutated, in the table, so
            # the list the caller took is a stable snapshot.
            body, crc = await asyncio.to_thread(self.body_encoder.encode, wrapper, whole=whole)
        elif len(topic_configs) > 64:
            body, crc = await asyncio.to_thread(_encode_register_body, wrapper)
        else:
            body, crc = _encode_register_body(wrapper)
        fields = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster_name,
                  "haServerAddr": ha_server_addr, "brokerId": str(broker_id), "compressed": "false",
                  "bodyCrc32": str(crc), **self.register_fields}

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

    async def need_register(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                            broker_name: str, broker_id: int, data_version: dict[str, Any]) -> bool:
        """BrokerOuterAPI#needRegister (forceRegister=false): QUERY_DATA_VERSION to every
        NameServer; True when any says changed, answers another version, or fails."""
        fields = {"brokerName": broker_name, "brokerAddr": broker_addr, "clusterName": cluster_name,
                  "brokerId": str(broker_id)}
        ours = DataVersion.from_json_dict(data_version)
        body = ours.encode()

        async def one(addr: str) -> bool:
            request = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, dict(fields), body)
            try:
                response = await self.client.invoke(addr, request, self.timeout)
            except Exception as exc:
                log.warning("query data version from name server %s failed: %s", addr, exc)
                return True
            if response.code != ResponseCode.SUCCESS:
                return False  # as upstream: only an answer that says so counts as changed
            changed = str((response.ext_fields or {}).get("changed", "true")).lower() != "false"
            if response.body:
                try:
                    changed = changed or DataVersion.decode(response.body) != ours
                except Exception:
                    changed = True
            return changed

        return any(await asyncio.gather(*(one(a) for a in namesrv_addrs)))

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

    # ---- Slave Acting Master (services/broker/failover) ---------------------------------------

    async def send_heartbeat(self, namesrv_addrs: list[str], *, cluster_name: str, broker_addr: str,
                             broker_name: str, broker_id: int, timeout_millis: int,
                             data_version: dict[str, Any] | None) -> None:
        """BrokerOuterAPI#sendHeartbeat (BROKER_HEARTBEAT, oneway) or, with
        compatibleWithOldNameSrv (``data_version`` given), #sendHeartbeatViaDataVersion
        (QUERY_DATA_VERSION, which a 4.x NameServer also counts as a sign of life)."""
        fields = {"clusterName": cluster_name, "brokerAddr": broker_addr, "brokerName": broker_name,
                  "brokerId": str(broker_id)}
        timeout = max(timeout_millis, 100) / 1000.0

        async def one(addr: str) -> None:
            try:
                if data_version is None:
                    request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, dict(fields))
                    await self.client.invoke_oneway(addr, request, timeout)
                else:
                    body = DataVersion.from_json_dict(data_version).encode()
                    request = RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, dict(fields), body)
                    await self.client.invoke(addr, request, timeout)
            except Exception as exc:
                log.debug("heartbeat to name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in namesrv_addrs))

    async def sync_broker_member_group(self, namesrv_addrs: list[str], *, cluster_name: str, broker_name: str,
                                       compatible: bool) -> dict[int, str] | None:
        """The broker set's live members, brokerId -> address (BrokerOuterAPI#syncBrokerMemberGroup):
        GET_BROKER_MEMBER_GROUP, or with compatibleWithOldNameSrv the route of the set's
        ``SYNC_BROKER_MEMBER_`` topic (#getBrokerMemberGroupCompatible). The first NameServer
        that answers wins; None when none did."""
        from orbitmq.broker.store.metadata.topic_config_manager import SYNC_BROKER_MEMBER_GROUP_PREFIX

        for addr in namesrv_addrs:
            try:
                if compatible:
                    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                      {"topic": SYNC_BROKER_MEMBER_GROUP_PREFIX + broker_name})
                else:
                    request = RemotingCommand.request(RequestCode.GET_BROKER_MEMBER_GROUP,
                                                      {"clusterName": cluster_name, "brokerName": broker_name})
                response = await self.client.invoke(addr, request, 3.0)
            except Exception as exc:
                log.warning("sync broker member group from name server %s failed: %s", addr, exc)
                continue
            if compatible and response.code == ResponseCode.TOPIC_NOT_EXIST:
                return {}
            if response.code != ResponseCode.SUCCESS:
                log.warning("sync broker member group from %s refused: %s %s", addr, response.code, response.remark)
                continue
            return _member_addrs(response.body, broker_name, compatible)
        return None


def _member_addrs(body: bytes | None, broker_name: str, compatible: bool) -> dict[int, str]:
    from orbitmq.common import fastjson

    if not body:
        return {}
    try:
        obj = json.loads(bytes(body))
    except ValueError:
        obj = fastjson.loads(bytes(body))  # a route body keys brokerAddrs by bare integers
    if compatible:
        datas = [bd for bd in obj.get("brokerDatas") or [] if bd.get("brokerName") == broker_name]
        addrs = datas[0].get("brokerAddrs") if datas else {}
    else:
        addrs = (obj.get("brokerMemberGroup") or {}).get("brokerAddrs") or {}
    return {int(k): str(v) for k, v in (addrs or {}).items()}
