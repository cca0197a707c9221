"""RemotingProtocolServer: the proxy's Remoting port (RIP-55, ``remotingListenPort``).

A Remoting client (DefaultMQProducer, DefaultMQPushConsumer, DefaultLitePullConsumer, mqadmin)
takes the proxy's Remoting address as its NameServer. The proxy answers GET_ROUTEINFO_BY_TOPIC
and GET_BROKER_CLUSTER_INFO itself, with every broker set's address replaced by its own
(GetTopicRouteActivity, ProxyTopicRouteData#buildTopicRouteData), so every later request comes
to the proxy too. Those are forwarded, as they came, to the master of the broker set they are
for (AbstractRemotingActivity#request): a 5.x client names the set in the header's ``bname``
(``n`` in SEND_MESSAGE_V2's short names). Beyond upstream, which answers VERSION_NOT_SUPPORTED
without it, a request from a 4.x client (no ``bname``) goes to the one broker set that can be
meant: the body's queues for LOCK/UNLOCK_BATCH_MQ, the topic's only broker set, the cluster's
only master, any master for the requests every master answers alike (the group's consumer
list), the master that takes it for END_TRANSACTION; only a request for a topic on several broker
sets gets VERSION_NOT_SUPPORTED.

Each client connection's requests travel on broker connections of its own (channels.py), so the
brokers know each client apart and what they send a client reaches it. With ACL 2.0 on the proxy
the port checks each request as a broker would (install_auth); forwarded requests keep the
client's own signature (the proxy's inner credentials are not put on them), so the brokers check
the client itself too. HEART_BEAT and UNREGISTER_CLIENT go
to every master. Codes the port does not serve are answered REQUEST_CODE_NOT_SUPPORTED, as
upstream's port answers them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from orbitmq.auth.engine import UNIQUE_MSG_QUERY_FLAG, V4_9_3, check_user, remoting_requirements
from orbitmq.auth.model import AuthenticationError, AuthError, denial_reason
from orbitmq.auth.signature import ACCESS_KEY, verify_remoting_signature
from orbitmq.client.errors import MQClientError
from orbitmq.common.constants import MASTER_ID
from orbitmq.common.route import BrokerData, ClusterInfo, TopicRouteData, parse_json
from orbitmq.proxy import tls
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.remoting.channels import BrokerLinks
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError, RemotingTimeoutError
from orbitmq.remoting.protocol import RPC_ONEWAY, RemotingCommand, next_opaque
from orbitmq.remoting.server import RemotingServer

if TYPE_CHECKING:
    from orbitmq.client import TopicRouteCache
    from orbitmq.proxy.auth import ProxyAuthChecker
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig
    from orbitmq.remoting.channel import Channel

log = logging.getLogger("orbitmq.proxy.remoting")

BROKER_NAME_FIELD = "bname"
BROKER_NAME_FIELD_FOR_SEND_MESSAGE_V2 = "n"  # SendMessageRequestHeaderV2's short name of bname

# The request codes forwarded to one broker set (RemotingProtocolServer#registerRemotingServer),
# with the header field naming their topic (for a 4.x client's request without bname).
FORWARDED: dict[int, str] = {
    RequestCode.SEND_MESSAGE: "topic",
    RequestCode.SEND_MESSAGE_V2: "b",
    RequestCode.SEND_BATCH_MESSAGE: "b",
    RequestCode.CONSUMER_SEND_MSG_BACK: "originTopic",
    RequestCode.END_TRANSACTION: "topic",
    RequestCode.RECALL_MESSAGE: "topic",
    RequestCode.PULL_MESSAGE: "topic",
    RequestCode.LITE_PULL_MESSAGE: "topic",
    RequestCode.POP_MESSAGE: "topic",
    RequestCode.ACK_MESSAGE: "topic",
    RequestCode.BATCH_ACK_MESSAGE: "topic",
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: "topic",
    RequestCode.UPDATE_CONSUMER_OFFSET: "topic",
    RequestCode.QUERY_CONSUMER_OFFSET: "topic",
    RequestCode.GET_MAX_OFFSET: "topic",
    RequestCode.GET_MIN_OFFSET: "topic",
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: "topic",
    RequestCode.LOCK_BATCH_MQ: "topic",
    RequestCode.UNLOCK_BATCH_MQ: "topic",
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: "topic",
    RequestCode.GET_CONSUMER_CONNECTION_LIST: "topic",
    RequestCode.CHECK_CLIENT_CONFIG: "topic",
}
# NameServer reads answered by a NameServer as they are (mqadmin topicList): no broker address in them.
NAMESRV_READS = {RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_TOPICS_BY_CLUSTER}
# Every master answers these alike (a client heartbeats every master): any one will do.
ANY_MASTER = {RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.GET_CONSUMER_CONNECTION_LIST,
              RequestCode.CHECK_CLIENT_CONFIG}
# Long polls: the broker may hold these this long (header field, milliseconds).
SUSPEND_FIELD = {RequestCode.PULL_MESSAGE: "suspendTimeoutMillis", RequestCode.LITE_PULL_MESSAGE:
                 "suspendTimeoutMillis", RequestCode.POP_MESSAGE: "pollTime"}
_MAX_SUSPEND_MS = 60_000


class _Refused(Exception):
    """A request answered by the proxy itself with ``code``."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code


class RemotingProtocolServer:
    """The Remoting port of one ProxyServer; shares its ClusterService (routes, broker connections)."""

    def __init__(self, config: ProxyConfig, cluster: ClusterService, routes: TopicRouteCache, host: str,
                 *, reuse_port: bool = False) -> None:
        self.config = config
        self.cluster = cluster
        self.routes = routes
        self.host = host
        self.links = BrokerLinks(cluster, config.grpc_proxy_relay_request_timeout_in_seconds)
        graceful = float(config.shutdown_wait_time_seconds) if config.enable_shutdown_gracefully else None
        self._server = RemotingServer(host, config.remoting_listen_port, tls_config=_tls_config(config),
                                      reuse_port=reuse_port, shutdown_wait_seconds=graceful)
        self._round_robin = 0
        for code in FORWARDED:
            self._server.register(code, self.forward)
        self._server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self.get_route_info_by_topic)
        self._server.register(RequestCode.GET_BROKER_CLUSTER_INFO, self.get_broker_cluster_info)
        for code in NAMESRV_READS:
            self._server.register(code, self.namesrv_read)
        self._server.register(RequestCode.HEART_BEAT, self.heartbeat)
        self._server.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client)

    def install_auth(self, checker: ProxyAuthChecker) -> None:
        """ACL 2.0 on the port (upstream's AuthenticationPipeline + AuthorizationPipeline): each
        request's AccessKey/Signature checked against the brokers' users, its resources against
        their ACLs, as a broker checks a Remoting request (orbitmq.auth.engine), before it is
        served; codes the port does not serve stay REQUEST_CODE_NOT_SUPPORTED."""
        cluster_name = self.config.rocket_mq_cluster_name

        async def check(request: RemotingCommand, channel: Channel) -> None:
            ext, body, code = request.ext_fields or {}, bytes(request.body or b""), str(request.code)
            username = ext.get(ACCESS_KEY) or None
            if checker.authentication and code not in checker.authn_whitelist:
                if not username:
                    raise AuthenticationError("username cannot be null")
                user = check_user(await checker.metadata.user(username), username)
                signed = ext
                if request.version <= V4_9_3 and UNIQUE_MSG_QUERY_FLAG in ext:
                    signed = {k: v for k, v in ext.items() if k != UNIQUE_MSG_QUERY_FLAG}
                if not verify_remoting_signature(user.password, signed, body):
                    raise AuthenticationError(f"check signature failed for User:{username}")
            if checker.authorization and code not in checker.authz_whitelist:
                requirements = remoting_requirements(request.code, ext, body, cluster_name)
                await checker.authorize(username, requirements, channel.remote_address)

        def guard(processor: Any) -> Any:
            async def guarded(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
                try:
                    await check(request, channel)
                except AuthError as exc:
                    if checker.on_denied is not None:
                        checker.on_denied(denial_reason(exc))
                    return request.response_to(exc.code, str(exc))
                return await processor(request, channel)
            return guarded

        self._server.set_guard(guard)

    @property
    def port(self) -> int:
        return self._server.port

    async def start(self) -> None:
        await self._server.start()
        log.info("Remoting proxy listening on %s:%d", self.host, self.port)

    async def begin_go_away(self) -> None:
        """enableShutdownGracefully: GO_AWAY to this port's clients, returning when the wait ends."""
        await self._server.begin_go_away()

    async def shutdown(self) -> None:
        await self._server.close()
        await self.links.shutdown()

    # ---- routes (GetTopicRouteActivity) --------------------------------------------------------

    def access_addr(self, channel: Channel) -> str:
        """remotingAccessAddr (else localServeAddr's host) with the Remoting port; without either,
        the address the client dialled."""
        host = self.config.remoting_access_addr or self.config.local_serve_addr.rpartition(":")[0]
        if host:
            return f"{host}:{self.port}"
        return channel.local_address

    def _through_proxy(self, bd: BrokerData, addr: str) -> BrokerData:
        out = bd.copy()
        out.broker_addrs = {MASTER_ID: addr} if bd.broker_addrs else {}
        return out

    async def get_route_info_by_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        topic = (request.ext_fields or {}).get("topic", "")
        if not topic:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "the request has no topic")
        try:
            route = await self.routes.get(topic)
        except MQClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return request.response_to(ResponseCode.TOPIC_NOT_EXIST,
                                           f"No topic route info in name server for the topic: {topic}")
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        addr = self.access_addr(channel)
        answer = TopicRouteData(queue_datas=list(route.queue_datas),
                                broker_datas=[self._through_proxy(bd, addr) for bd in route.broker_datas],
                                order_topic_conf=route.order_topic_conf)
        return request.response_to(ResponseCode.SUCCESS, body=answer.encode())

    async def get_broker_cluster_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """Beyond upstream's port: mqadmin clusterList/topicRoute and the clients' cluster look-ups
        see the broker sets, each at the proxy's address."""
        info = await self.routes.cluster_info()
        addr = self.access_addr(channel)
        answer = ClusterInfo({name: self._through_proxy(bd, addr) for name, bd in info.broker_addr_table.items()},
                             {k: set(v) for k, v in info.cluster_addr_table.items()})
        return request.response_to(ResponseCode.SUCCESS, body=answer.encode())

    async def namesrv_read(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """The first NameServer that answers; the client's signature goes with it."""
        failure: _Refused | None = None
        for addr in self.routes.namesrv_addrs:
            try:
                return await self._send(channel, addr, request)
            except _Refused as exc:
                failure = exc
        return request.response_to(ResponseCode.SYSTEM_ERROR, str(failure or "no NameServer is configured"))

    # ---- forwarding (AbstractRemotingActivity#request) -----------------------------------------

    async def forward(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            try:
                addr = await self._target(request)
            except _Refused as exc:
                if request.code != RequestCode.END_TRANSACTION or exc.code != ResponseCode.VERSION_NOT_SUPPORTED:
                    raise
                return await self._end_transaction_anywhere(channel, request)
            return await self._send(channel, addr, request)
        except _Refused as exc:
            return request.response_to(exc.code, str(exc))

    async def _end_transaction_anywhere(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """A 4.x client's END_TRANSACTION names neither broker set nor topic. The half message's
        broker is the one that takes it: a broker checks the record at commitLogOffset against the
        producer group, the transaction state table offset and the transaction id
        (EndTransactionProcessor), so the others refuse it. Asked two-way, one master after the other."""
        two_way = replace(request, flag=request.flag & ~RPC_ONEWAY)
        answer: RemotingCommand | None = None
        for bd in await self.cluster.all_masters():
            try:
                answer = await self._send(channel, bd.master_addr or "", two_way)
            except _Refused as exc:
                answer = request.response_to(exc.code, str(exc))
            if answer is not None and answer.code == ResponseCode.SUCCESS:
                break
        if request.flag & RPC_ONEWAY:
            return None
        return answer or request.response_to(ResponseCode.SYSTEM_ERROR, "no broker master is online")

    async def _send(self, channel: Channel, addr: str, request: RemotingCommand) -> RemotingCommand | None:
        timeout = self.config.remoting_timeout_millis
        suspend = SUSPEND_FIELD.get(request.code)
        if suspend:
            try:
                timeout += min(max(int((request.ext_fields or {}).get(suspend, 0)), 0), _MAX_SUSPEND_MS)
            except ValueError:
                raise _Refused(ResponseCode.SYSTEM_ERROR, f"{suspend} is not a number") from None
        command = replace(request, opaque=next_opaque())  # the proxy's connection has its own opaques
        try:
            broker = await self.links.link(channel).get_channel(addr)
            if request.flag & RPC_ONEWAY:
                await broker.invoke_oneway(command)
                return None
            return await broker.invoke(command, timeout / 1000.0)
        except RemotingTimeoutError as exc:
            raise _Refused(ResponseCode.SYSTEM_ERROR, f"{addr} did not answer in time: {exc}") from None
        except (RemotingError, OSError) as exc:
            raise _Refused(ResponseCode.SYSTEM_ERROR, f"cannot reach {addr}: {exc}") from None

    def _broker_name(self, request: RemotingCommand) -> str:
        fields = request.ext_fields or {}
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            name = fields.get(BROKER_NAME_FIELD_FOR_SEND_MESSAGE_V2) or fields.get(BROKER_NAME_FIELD)
        else:
            name = fields.get(BROKER_NAME_FIELD)
        if not name and request.code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ) and request.body:
            try:  # a 4.x client's LockBatchRequestBody names the queues' broker set
                names = {q["brokerName"] for q in parse_json(request.body).get("mqSet") or []}
            except (ValueError, TypeError, KeyError, AttributeError):
                raise _Refused(ResponseCode.SYSTEM_ERROR, "the request body is not a LockBatchRequestBody") from None
            if len(names) == 1:
                name = names.pop()
        if not name and request.code == RequestCode.BATCH_ACK_MESSAGE and request.body:
            try:  # BatchAckMessageRequestBody#brokerName
                name = str(parse_json(request.body).get("brokerName") or "")
            except (ValueError, TypeError, AttributeError):
                raise _Refused(ResponseCode.SYSTEM_ERROR, "the request body is not a BatchAckMessageRequestBody") from None
        return name or ""

    async def _target(self, request: RemotingCommand) -> str:
        """The master address the request is for."""
        name = self._broker_name(request)
        topic = (request.ext_fields or {}).get(FORWARDED[request.code]) or None
        if name:
            return await self._master(name, topic)
        masters = await self.cluster.all_masters()
        if request.code in ANY_MASTER and masters:
            self._round_robin += 1
            return masters[self._round_robin % len(masters)].master_addr or ""
        names = {bd.broker_name for bd in masters}
        if topic and len(names) > 1:
            try:
                names = {q.broker_name for q in (await self.routes.get(topic)).queue_datas}
            except MQClientError:
                pass
        if len(names) == 1:
            return await self._master(names.pop(), topic)
        raise _Refused(ResponseCode.VERSION_NOT_SUPPORTED,
                       "Request doesn't have field bname (a RocketMQ client before 5.0 reaches a topic on "
                       "several broker sets through the NameServers, not through the proxy)")

    async def _master(self, name: str, topic: str | None) -> str:
        try:
            return await self.cluster.broker_addr(name, topic)
        except ProxyError:
            raise _Refused(ResponseCode.SYSTEM_ERROR, f"broker {name} is not found or has no master") from None

    # ---- clients (ClientManagerActivity) --------------------------------------------------------

    async def _every_master(self, channel: Channel, request: RemotingCommand) -> list[RemotingCommand | BaseException]:
        masters = [bd.master_addr for bd in await self.cluster.all_masters() if bd.master_addr]
        if not masters:
            raise _Refused(ResponseCode.SYSTEM_ERROR, "no broker master is online")
        return await asyncio.gather(*(self._send(channel, addr, request) for addr in masters),
                                    return_exceptions=True)

    async def heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """HEART_BEAT to every master (a master that joins later hears the next one). Answered
        without IS_SUPPORT_HEART_BEAT_V2 (and IS_SUB_CHANGE): each heartbeat carries the whole
        subscription, so a master that joins, or restarts, always gets it."""
        body = bytes(request.body or b"")
        repeated = self.links.repeated_heartbeat(channel, body)
        if repeated is not None:
            return repeated
        try:
            _check_heartbeat(body)
            answer = _first_success(request, await self._every_master(channel, request),
                                    drop=("IS_SUPPORT_HEART_BEAT_V2", "IS_SUB_CHANGE"))
            if answer is not None and answer.code == ResponseCode.SUCCESS:
                self.links.heartbeat_forwarded(channel, body, answer)
            return answer
        except ValueError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"bad heartbeat: {exc}")
        except _Refused as exc:
            return request.response_to(exc.code, str(exc))

    async def unregister_client(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        try:
            return _first_success(request, await self._every_master(channel, request))
        except _Refused as exc:
            return request.response_to(exc.code, str(exc))


def _check_heartbeat(body: bytes) -> None:
    """A HeartbeatData with a clientID (ValueError otherwise), before it costs a broker a look."""
    try:
        data = parse_json(body) if body else None
    except Exception as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("clientID"), str) or not data["clientID"]:
        raise ValueError("the body carries no clientID")


def _first_success(request: RemotingCommand, results: list[Any], drop: tuple[str, ...] = ()) -> RemotingCommand | None:
    """The first broker's SUCCESS (else the first answer, else the first failure's reason)."""
    if request.flag & RPC_ONEWAY:
        return None
    answers = [r for r in results if isinstance(r, RemotingCommand)]
    for answer in answers:
        if answer.code == ResponseCode.SUCCESS:
            ext = {k: v for k, v in (answer.ext_fields or {}).items() if k not in drop}
            return replace(answer, ext_fields=ext)
    if answers:
        return answers[0]
    failure = next((r for r in results if isinstance(r, BaseException)), None)
    return request.response_to(getattr(failure, "code", ResponseCode.SYSTEM_ERROR), str(failure))


def _tls_config(config: ProxyConfig) -> Any:
    """The Remoting port serves TLS as the gRPC port does (tls.server.mode, tlsTestModeEnable,
    tlsCertPath/tlsKeyPath, the mutual-TLS keys), under orbitmq.remoting.tls's attribute names."""
    if not tls.tls_enabled(config):
        return None
    return SimpleNamespace(
        tls_server_mode=config.tls_server_mode, tls_test_mode_enable=config.tls_test_mode_enable,
        tls_server_cert_path=config.tls_cert_path, tls_server_key_path=config.tls_key_path,
        tls_server_key_password=config.tls_server_key_password,
        tls_server_need_client_auth=config.tls_server_need_client_auth,
        tls_server_auth_client=config.tls_server_auth_client,
        tls_server_trust_cert_path=config.tls_server_trust_cert_path)
