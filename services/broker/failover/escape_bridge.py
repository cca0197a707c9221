"""EscapeBridge: the writes of a broker's own services when it may not write its CommitLog.

Delay-level and timer delivery, POP revive's retry and DLQ messages and the transaction check's
half-message copies are written by the broker itself. On a master they go to the local store. A
slave acting as master (services/broker/failover/acting_master.py) must not append to its
CommitLog: it would diverge from the master it replicates. With ``enableRemoteEscape`` its writes
escape to another broker set's master of the same topic, sent as SEND_MESSAGE_V2 like any
producer's (EscapeBridge#putMessage / #putMessageToRemoteBroker); without it they are refused with
SERVICE_NOT_AVAILABLE and the service tries again later, as upstream.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from orbitmq.broker.pop.constants import REVIVE_GROUP
from orbitmq.broker.store.config import SLAVE
from orbitmq.broker.store.model import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)
from orbitmq.client.api import MQClientAPI
from orbitmq.common.constants import AUTO_CREATE_TOPIC_KEY_TOPIC, PERM_WRITE, RMQ_SYS_TRANS_HALF_TOPIC
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.route import TopicRouteData
from orbitmq.common.sysflag import TRANSACTION_PREPARED_TYPE, build_pull_sys_flag, reset_transaction_value
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController
    from orbitmq.broker.store.model import MessageExtBrokerInner

log = logging.getLogger(__name__)

# EscapeBridge#getProducerGroup: the message's own producer group, else this one.
INNER_PRODUCER_GROUP = "InnerProducerGroup"
SEND_TIMEOUT_S = 3.0
# TopicRouteInfoManager refreshes every 30 s; a miss or a failed send refreshes at once.
ROUTE_TTL_S = 30.0

_SENT_OK = {ResponseCode.SUCCESS: PutMessageStatus.PUT_OK,
            ResponseCode.FLUSH_DISK_TIMEOUT: PutMessageStatus.FLUSH_DISK_TIMEOUT,
            ResponseCode.FLUSH_SLAVE_TIMEOUT: PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
            ResponseCode.SLAVE_NOT_AVAILABLE: PutMessageStatus.SLAVE_NOT_AVAILABLE}


class EscapeBridge:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.api = MQClientAPI(timeout=SEND_TIMEOUT_S)
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._round_robin = itertools.count()
        # Messages written to other broker sets since start (tests and the log read it).
        self.escaped = 0

    async def close(self) -> None:
        await self.api.close()

    def _is_master(self) -> bool:
        return self.broker.store_config.broker_role != SLAVE

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """The local store on a master; another broker set's master while acting; else refused."""
        if self._is_master():
            return await self.broker.put_message(msg)
        cfg = self.broker.config
        if cfg.enable_slave_acting_master and cfg.enable_remote_escape:
            return await self.put_message_to_remote_broker(msg)
        log.warning("Put message failed, enableSlaveActingMaster=%s, enableRemoteEscape=%s.",
                    cfg.enable_slave_acting_master, cfg.enable_remote_escape)
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    def is_remote(self) -> bool:
        """True when put_message would send to another broker set (the caller keeps no local index)."""
        cfg = self.broker.config
        return not self._is_master() and cfg.enable_slave_acting_master and cfg.enable_remote_escape

    async def put_message_to_specific_queue(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """EscapeBridge#putMessageToSpecificQueue (POP checkpoints and acks to the revive log): the
        local store on a master; while acting, the queue of another broker set chosen by the hash of
        topic and store host, so a checkpoint and the acks that match it land in one revive queue."""
        if self._is_master():
            return await self.broker.put_message(msg)
        if not self.is_remote():
            return await self.put_message(msg)  # refused, and logged, there
        route = await self._route(msg.topic)
        own = self.broker.config.broker_name
        queues: list[tuple[str, str, int]] = []
        if route is not None:
            masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                addr = masters.get(qd.broker_name)
                if qd.broker_name != own and addr:
                    queues.extend((qd.broker_name, addr, q) for q in range(qd.write_queue_nums))
        if not queues:
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        host = self.broker.config.broker_addr
        index = java_string_hash(msg.topic + host) % len(queues)
        return await self.put_message_to_remote_broker(msg, target=queues[index])

    async def get_message(self, broker_name: str, topic: str, queue_id: int, offset: int) -> Any:
        """EscapeBridge#getMessageAsync of another broker set's message (a POP checkpoint written
        here by a slave acting for that set): one PULL from its brokerId 0 (the acting slave) or
        smallest member. The decoded MessageExt, or None when it is not there."""
        route = await self._route(topic)
        bd = route.broker_data(broker_name) if route is not None else None
        if bd is None or not bd.broker_addrs:
            return None
        addr = bd.broker_addrs.get(0) or bd.broker_addrs[min(bd.broker_addrs)]
        header = h.PullMessageRequestHeader(
            consumer_group=REVIVE_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=1,
            sys_flag=build_pull_sys_flag(False, False, True, False), commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=0, expression_type="TAG", broker_name=broker_name)
        try:
            result = await self.api.pull_message(addr, header, SEND_TIMEOUT_S)
        except Exception as exc:
            log.warning("getMessageFromRemote %s@%d:%d from %s (%s) failed: %s", topic, queue_id, offset,
                        broker_name, addr, exc)
            raise
        for msg in result.messages:
            if msg.queue_offset == offset:
                return msg
        return None

    async def put_message_to_remote_broker(self, msg: MessageExtBrokerInner,
                                           target: tuple[str, str, int] | None = None) -> PutMessageResult:
        topic, queue_id, sys_flag, props = msg.topic, msg.queue_id, msg.sys_flag, dict(msg.properties)
        if topic == RMQ_SYS_TRANS_HALF_TOPIC:
            # TransactionalMessageUtil#buildTransactionalMessageFromHalfMessage: the remote broker
            # stores it as a new half message of the real topic and checks it back itself.
            topic = props.pop(MessageConst.REAL_TOPIC, topic)
            queue_id = int(props.pop(MessageConst.REAL_QUEUE_ID, "0") or 0)
            sys_flag = reset_transaction_value(sys_flag, TRANSACTION_PREPARED_TYPE)
        if target is None:
            target = await self._select_queue(topic)
        if target is None:
            log.warning("putMessageToRemoteBroker failed, remote broker not found. Topic: %s, MsgId: %s, Broker: %s",
                        topic, props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), self.broker.config.broker_name)
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        broker_name, addr, remote_queue = target
        if queue_id >= 0 and topic != msg.topic:
            remote_queue = queue_id if queue_id < self._write_queues(topic, broker_name) else remote_queue
        reconsume = props.pop(MessageConst.RECONSUME_TIME, None) if topic.startswith("%RETRY%") else None
        max_reconsume = props.pop(MessageConst.MAX_RECONSUME_TIMES, None) if topic.startswith("%RETRY%") else None
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"  # messageExt.setWaitStoreMsgOK(false)
        header = h.SendMessageRequestHeaderV2(
            a=props.get(MessageConst.PRODUCER_GROUP) or INNER_PRODUCER_GROUP, b=topic, c=AUTO_CREATE_TOPIC_KEY_TOPIC,
            d=4, e=remote_queue, f=sys_flag, g=msg.born_timestamp, h=msg.flag, i=properties_to_string(props),
            j=int(reconsume) if reconsume is not None else msg.reconsume_times, k=False,
            l=int(max_reconsume) if max_reconsume is not None else None, m=False, n=broker_name)
        try:
            response = await self.api.invoke(addr, RequestCode.SEND_MESSAGE_V2, header, msg.body, SEND_TIMEOUT_S)
        except Exception as exc:
            self._routes.pop(topic, None)
            log.warning("sendMessageToSpecificBroker %s (%s) for topic %s failed: %s", broker_name, addr, topic, exc)
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        status = _SENT_OK.get(response.code)
        if status is None:
            self._routes.pop(topic, None)
            log.warning("sendMessageToSpecificBroker %s refused a message of %s: %s %s", broker_name, topic,
                        response.code, response.remark)
            return PutMessageResult(PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL)
        self.escaped += 1
        fields = response.ext_fields or {}
        try:
            logics_offset = int(fields.get("queueOffset") or 0)
        except ValueError:
            logics_offset = 0
        # transformSendResult2PutResult: stored (remotely); nothing of the local CommitLog.
        appended = AppendMessageResult(AppendMessageStatus.PUT_OK, msg_id=fields.get("msgId") or "",
                                       store_timestamp=int(time.time() * 1000), logics_offset=logics_offset)
        return PutMessageResult(status, appended, remote=True)

    def _write_queues(self, topic: str, broker_name: str) -> int:
        cached = self._routes.get(topic)
        if cached is None:
            return 0
        for qd in cached[1].queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return 0

    async def _route(self, topic: str, refresh: bool = False) -> TopicRouteData | None:
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < ROUTE_TTL_S:
            return cached[1]
        for addr in self.broker.config.namesrv_addr_list():
            try:
                route = await self.api.get_topic_route(addr, topic, SEND_TIMEOUT_S)
            except Exception as exc:
                log.debug("route of %s from %s: %s", topic, addr, exc)
                continue
            self._routes[topic] = (time.monotonic(), route)
            return route
        return None

    async def _select_queue(self, topic: str) -> tuple[str, str, int] | None:
        """TopicPublishInfo#selectOneMessageQueue(own broker name): a writable queue of another
        broker set that has a master, round robin."""
        own = self.broker.config.broker_name
        for refresh in (False, True):
            route = await self._route(topic, refresh)
            if route is None:
                continue
            masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
            choices: list[tuple[str, str, int]] = []
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                addr = masters.get(qd.broker_name)
                if qd.broker_name == own or not addr or not qd.perm & PERM_WRITE:
                    continue
                choices.extend((qd.broker_name, addr, q) for q in range(qd.write_queue_nums))
            if choices:
                return choices[next(self._round_robin) % len(choices)]
        return None


