"""DefaultRequestProcessor: the NameServer's request handlers, one per request code.

Responses follow upstream's codes and remarks. A request whose header lacks a required field or
whose body does not decode gets SYSTEM_ERROR with the reason (as upstream's
RemotingCommandException does), and the connection keeps serving.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from orbitmq.common.config import parse_properties_text
from orbitmq.common.route import (
    VERSION_V3_0_11,
    BrokerData,
    DataVersion,
    RegisterBrokerBody,
    RouteDataError,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    dump_json,
)
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingCommandError
from orbitmq.remoting.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeatRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.namesrv.controller import NamesrvController

log = logging.getLogger("orbitmq.namesrv")

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil
ZONE_NAME = "__ZONE_NAME"  # MixAll.ZONE_NAME extField
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo: the hint RocketMQ appends to user-facing error remarks."""
    return f"\nSee {url} for further details."


def crc32(data: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to a non-negative Java int."""
    return zlib.crc32(data) & 0x7FFFFFFF


Handler = Callable[[RemotingCommand, Any], Awaitable[RemotingCommand]]

# A registration body carries the broker's whole topic table: ~40 ms of JSON (and maybe zlib)
# for 10k topics. Bodies this large are decoded on a worker thread, small ones stay on the loop.
OFFLOAD_DECODE_BYTES = 64 * 1024

_T = TypeVar("_T")


async def _off_loop_if(large: bool, fn: Callable[..., _T], *args: Any) -> _T:
    if large:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


class DefaultRequestProcessor:
    def __init__(self, controller: NamesrvController) -> None:
        self.controller = controller
        self.started_at = time.monotonic()
        self.handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_BROKER_MEMBER_GROUP: self.get_broker_member_group,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
        }

    @property
    def config(self) -> NamesrvConfig:
        return self.controller.config

    @property
    def routes(self):
        return self.controller.route_info_manager

    @property
    def kv(self):
        return self.controller.kv_config_manager

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        handler = self.handlers.get(request.code)
        if handler is None:
            return request.response_to(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {request.code} not supported")
        try:
            return await handler(request, channel)
        except (RemotingCommandError, RouteDataError) as exc:
            log.warning("bad request code=%s from %s: %s", request.code,
                        getattr(channel, "remote_address", "?"), exc)
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))

    @staticmethod
    def _ok(request: RemotingCommand, body: bytes = b"", ext_fields: dict[str, str] | None = None
            ) -> RemotingCommand:
        return request.response_to(ResponseCode.SUCCESS, None, ext_fields, body)

    # ---- KV config ------------------------------------------------------------------------------

    async def put_kv_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_command(request)
        self.kv.put_kv_config(header.namespace, header.key, header.value)
        await self.kv.persist()
        return self._ok(request)

    async def get_kv_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_command(request)
        value = self.kv.get_kv_config(header.namespace, header.key)
        if value is not None:
            return self._ok(request, ext_fields=GetKVConfigResponseHeader(value=value).to_ext_fields())
        return request.response_to(ResponseCode.QUERY_NOT_FOUND,
                                   f"No config item, Namespace: {header.namespace} Key: {header.key}")

    async def delete_kv_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = DeleteKVConfigRequestHeader.from_command(request)
        self.kv.delete_kv_config(header.namespace, header.key)
        await self.kv.persist()
        return self._ok(request)

    async def get_kv_list_by_namespace(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetKVListByNamespaceRequestHeader.from_command(request)
        body = self.kv.get_kv_list_by_namespace(header.namespace)
        if body is not None:
            return self._ok(request, body)
        return request.response_to(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")

    # ---- broker registration -------------------------------------------------------------------

    async def register_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_command(request)
        if header.body_crc32 and crc32(request.body or b"") != header.body_crc32:
            log.warning("receive registerBroker request,crc32 not match,from %s",
                        getattr(channel, "remote_address", "?"))
            return request.response_to(ResponseCode.SYSTEM_ERROR, "crc32 not match")

        wrapper: TopicConfigSerializeWrapper
        filter_servers: list[str] | None = None
        if request.version >= VERSION_V3_0_11:
            if request.body:
                try:
                    # A compressed body inflates ~10x: decode it off the loop whatever its size.
                    large = bool(header.compressed) or len(request.body) >= OFFLOAD_DECODE_BYTES
                    body = await _off_loop_if(large, RegisterBrokerBody.decode, request.body, header.compressed,
                                              request.version)
                except RouteDataError as exc:
                    raise RouteDataError(f"Failed to decode RegisterBrokerBody: {exc}") from None
            else:
                body = RegisterBrokerBody()
                body.topic_config_serialize_wrapper.data_version = DataVersion(0, 0, 0)
            wrapper = body.topic_config_serialize_wrapper
            filter_servers = body.filter_server_list
        elif request.body:
            wrapper = await _off_loop_if(len(request.body) >= OFFLOAD_DECODE_BYTES, TopicConfigSerializeWrapper.decode,
                                         request.body)
        else:
            wrapper = TopicConfigSerializeWrapper(data_version=DataVersion(0, 0, 0))

        result = self.routes.register_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id,
            header.ha_server_addr, request.ext_fields.get(ZONE_NAME), header.heartbeat_timeout_millis,
            header.enable_acting_master, wrapper, filter_servers, channel)
        if result is None:
            # A single-topic registration must follow the broker's first full registration.
            return request.response_to(ResponseCode.SYSTEM_ERROR, "register broker failed")

        response_header = RegisterBrokerResponseHeader(ha_server_addr=result.ha_server_addr,
                                                       master_addr=result.master_addr)
        body_out = b""
        if self.config.return_order_topic_config_to_broker:
            body_out = self.kv.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG) or b""
        return self._ok(request, body_out, response_header.to_ext_fields())

    async def unregister_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = UnRegisterBrokerRequestHeader.from_command(request)
        self.routes.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name,
                                      header.broker_id)
        return self._ok(request)

    async def broker_heartbeat(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.from_command(request)
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        return self._ok(request)

    async def query_data_version(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.from_command(request)
        # No body is no version (RemotingSerializable#decode of null), so "changed", as upstream.
        data_version = DataVersion.decode(request.body) if request.body else None
        changed = self.routes.is_broker_topic_config_changed(header.cluster_name, header.broker_addr, data_version)
        self.routes.update_broker_info_update_timestamp(header.cluster_name, header.broker_addr)
        ours = self.routes.query_broker_topic_config(header.cluster_name, header.broker_addr)
        body = ours.encode() if ours is not None else b""
        return self._ok(request, body, QueryDataVersionResponseHeader(changed=changed).to_ext_fields())

    async def get_broker_member_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetBrokerMemberGroupRequestHeader.from_command(request)
        addrs = self.routes.get_broker_member_group(header.cluster_name, header.broker_name)
        group = BrokerData(header.cluster_name, header.broker_name, addrs).to_json_dict()
        member_group = {"cluster": group["cluster"], "brokerName": group["brokerName"],
                        "brokerAddrs": group["brokerAddrs"]}
        return self._ok(request, dump_json({"brokerMemberGroup": member_group}))

    async def wipe_write_perm_of_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_command(request)
        count = self.routes.wipe_write_perm_of_broker(header.broker_name)
        log.info("wipe write perm of broker[%s], client: %s, %s", header.broker_name,
                 getattr(channel, "remote_address", "?"), count)
        return self._ok(request, ext_fields=WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields())

    async def add_write_perm_of_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_command(request)
        count = self.routes.add_write_perm_of_broker(header.broker_name)
        log.info("add write perm of broker[%s], client: %s, %s", header.broker_name,
                 getattr(channel, "remote_address", "?"), count)
        return self._ok(request, ext_fields=AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext_fields())

    # ---- routes and topics ---------------------------------------------------------------------

    async def get_route_info_by_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_command(request)
        if (self.config.need_wait_for_service
                and time.monotonic() - self.started_at < self.config.wait_seconds_for_service):
            log.warning("name server not ready. request code %s ", request.code)
            return request.response_to(ResponseCode.SYSTEM_ERROR, "name server not ready")
        route: TopicRouteData | None = self.routes.pickup_topic_route_data(header.topic)
        if route is None and self.controller.product_env_routes is not None:
            # clusterTest=true (services/namesrv/cluster_test.py): ask the product environment.
            body = await self.controller.product_env_routes.route_body(header.to_ext_fields())
            if body is not None:
                return self._ok(request, body)
        if route is None:
            return request.response_to(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{suggest_todo(FAQ_URL)}")
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
        return self._ok(request, route.encode())

    async def get_broker_cluster_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._ok(request, self.routes.get_all_cluster_info().encode())

    async def get_all_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, self.routes.get_all_topic_list().encode())

    async def delete_topic_in_namesrv(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_command(request)
        self.routes.delete_topic(header.topic, header.cluster_name)
        return self._ok(request)

    async def register_topic_in_namesrv(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = RegisterTopicRequestHeader.from_command(request)
        if request.body:
            route = TopicRouteData.decode(request.body)
            if route.queue_datas:
                self.routes.register_topic(header.topic, route.queue_datas)
        return self._ok(request)

    async def get_topics_by_cluster(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "disable")
        header = GetTopicsByClusterRequestHeader.from_command(request)
        return self._ok(request, self.routes.get_topics_by_cluster(header.cluster).encode())

    async def get_system_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._ok(request, self.routes.get_system_topic_list().encode())

    async def get_unit_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, self.routes.get_unit_topics().encode())

    async def get_has_unit_sub_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, self.routes.get_has_unit_sub_topic_list().encode())

    async def get_has_unit_sub_ununit_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "disable")
        return self._ok(request, self.routes.get_has_unit_sub_un_unit_topic_list().encode())

    # ---- namesrv config ------------------------------------------------------------------------

    async def update_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        log.info("updateConfig called by %s", getattr(channel, "remote_address", "?"))
        if not request.body:
            return self._ok(request)
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
        updates = parse_properties_text(text)
        if any(key in self.config.black_listed_keys() for key in updates):
            return request.response_to(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        unknown = sorted(k for k in updates if k not in NamesrvConfig.config_keys())
        if unknown:
            return request.response_to(ResponseCode.INVALID_PARAMETER,
                                       f"unknown namesrv config keys: {', '.join(unknown)}")
        try:
            fresh = NamesrvConfig.from_mapping({**self.config.to_dict(), **updates})
        except ValueError as exc:
            return request.response_to(ResponseCode.INVALID_PARAMETER, str(exc))
        for fld in dataclasses.fields(fresh):
            setattr(self.config, fld.name, getattr(fresh, fld.name))
        await self.controller.persist_config()
        return self._ok(request)

    async def get_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return self._ok(request, self.config.to_properties().encode("utf-8"))
