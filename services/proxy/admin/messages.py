"""QueryMessage: a topic's messages by id, key or subscription within a time range (mqadmin
queryMsgByUniqueKey / queryMsgByKey / printMsg -s), paged."""

from __future__ import annotations

import time

from orbitmq.client import MQBrokerError
from orbitmq.common.constants import TOOLS_CONSUMER_GROUP
from orbitmq.common.message import MessageExt
from orbitmq.common.message_codec import decode_records
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.route import TopicRouteData
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import converter, errors
from orbitmq.proxy.admin.common import AdminParts, route_masters, route_of, timestamp_ms, topic_name
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError

Code = pb.Code
DEFAULT_MAX_MESSAGES = 64  # QueryMsgByKeySubCommand's maxNum
MAX_MATCHES = 2048  # matches gathered for paging, at most
SCAN_BATCH = 32
MAX_SCANNED_PER_QUEUE = 20_000  # a subscription scan reads this many messages of one queue at most
_FOREVER = 2**63 - 1
_PULL_SYS_FLAG_SUBSCRIPTION = 0x4


async def by_key(parts: AdminParts, route: TopicRouteData, topic: str, key: str, max_num: int, begin: int, end: int,
                 unique: bool, broker: str | None = None) -> list[MessageExt]:
    """QUERY_MESSAGE on the route's masters: by KEYS, or by UNIQ_KEY (the message id clients see)."""
    found: list[MessageExt] = []
    for name, addr in route_masters(route):
        if broker and name != broker:
            continue
        header = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
                  "endTimestamp": str(end)}
        if unique:
            header["_UNIQUE_KEY_QUERY"] = "true"
        response = await parts.api.call(addr, RequestCode.QUERY_MESSAGE, header,
                                        ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code != ResponseCode.SUCCESS or not response.body:
            continue
        for msg in decode_records(response.body, check_crc=False):
            if (msg.uniq_key == key) if unique else (key in msg.keys):
                found.append(msg)
    return found


async def find_message(parts: AdminParts, topic: str, message_id: str) -> MessageExt:
    """A message of ``topic`` by the id clients see (UNIQ_KEY), else by its offset message id;
    MESSAGE_NOT_FOUND when neither finds it."""
    route = await route_of(parts, topic)
    found = await by_key(parts, route, topic, message_id, 32, 0, _FOREVER, unique=True)
    if found:
        return max(found, key=lambda m: m.store_timestamp)
    try:
        decode_offset_message_id(message_id)
    except ValueError:
        raise ProxyError(Code.MESSAGE_NOT_FOUND, f"message {message_id} not found in topic {topic}") from None
    try:
        msg = await parts.api.view_message_by_id(message_id)
    except (MQBrokerError, RemotingError, OSError, OverflowError, IndexError):  # no such broker or record
        raise ProxyError(Code.MESSAGE_NOT_FOUND, f"message {message_id} not found in topic {topic}") from None
    if msg.topic != topic:
        raise ProxyError(Code.MESSAGE_NOT_FOUND, f"message {message_id} is not a message of topic {topic}")
    return msg


async def _scan(parts: AdminParts, route: TopicRouteData, topic: str, expression: str, begin: int, end: int,
                want: int, broker: str | None, queue: int | None) -> list[MessageExt]:
    """Messages matching a TAG expression stored in [begin, end], queue by queue from the first
    offset stored at ``begin`` (SEARCH_OFFSET_BY_TIMESTAMP), as printMsg -s -b -e reads them."""
    api = parts.api
    nums = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
    found: list[MessageExt] = []
    for name, addr in route_masters(route, readable_only=True):
        if broker and name != broker:
            continue
        for queue_id in range(nums.get(name, 0)):
            if queue is not None and queue_id != queue:
                continue
            offset = await api.search_offset(addr, topic, queue_id, begin) if begin > 0 else \
                await api.get_min_offset(addr, topic, queue_id)
            last = await api.get_max_offset(addr, topic, queue_id)
            stop = min(last, offset + MAX_SCANNED_PER_QUEUE)
            while offset < stop and len(found) < want:
                header = h.PullMessageRequestHeader(
                    consumer_group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset,
                    max_msg_nums=SCAN_BATCH, sys_flag=_PULL_SYS_FLAG_SUBSCRIPTION, commit_offset=0,
                    suspend_timeout_millis=0, subscription=expression, sub_version=int(time.time() * 1000),
                    expression_type="TAG")
                result = await api.pull_message(addr, header)
                past_end = False
                for msg in result.messages:
                    if msg.store_timestamp > end:
                        past_end = True
                        break
                    if msg.store_timestamp >= begin:
                        found.append(msg)
                if past_end or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    return found


async def query_message(parts: AdminParts, request: apb.ListMessageRequest) -> apb.ListMessageResponse:
    topic = topic_name(request.topic)
    route = await route_of(parts, topic)
    if request.max_message_nums < 0:
        raise ProxyError(Code.BAD_REQUEST, f"max_message_nums {request.max_message_nums} is negative")
    limit = request.max_message_nums or DEFAULT_MAX_MESSAGES
    begin = timestamp_ms(request.begin_timestamp, 0)
    end = timestamp_ms(request.end_timestamp, _FOREVER)
    if end < begin:
        raise ProxyError(Code.BAD_REQUEST, "end_timestamp is before begin_timestamp")
    broker = request.broker_name if request.HasField("broker_name") else None
    queue = request.queue_id if request.HasField("queue_id") else None
    if broker is not None and broker not in {name for name, _addr in route_masters(route)}:
        raise ProxyError(Code.NOT_FOUND, f"broker {broker} serves no queue of topic {topic}")
    which = request.WhichOneof("search_key")
    want = MAX_MATCHES
    if which == "message_id":
        if not request.message_id:
            raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message_id is empty")
        found = await by_key(parts, route, topic, request.message_id, want, begin, end, True, broker)
        if not found and begin == 0 and end == _FOREVER:
            try:
                found = [await find_message(parts, topic, request.message_id)]
            except ProxyError:
                found = []
    elif which == "message_key":
        if not request.message_key:
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "message_key is empty")
        found = await by_key(parts, route, topic, request.message_key, want, begin, end, False, broker)
    elif which == "subscription":
        found = await _scan(parts, route, topic, request.subscription or "*", begin, end, want, broker, queue)
    elif which == "lite_topic":
        found = []  # OrbitMQ serves no lite topics (SyncLiteSubscription): no message belongs to one
    else:
        raise ProxyError(Code.BAD_REQUEST, "one of message_id, message_key, subscription or lite_topic is required")
    if queue is not None:
        found = [m for m in found if m.queue_id == queue]
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))
    size = request.page_size if request.HasField("page_size") and request.page_size > 0 else limit
    if request.HasField("scroll_id") and request.scroll_id:
        try:
            start = int(request.scroll_id)
        except ValueError:
            raise ProxyError(Code.BAD_REQUEST, f"scroll_id {request.scroll_id!r} is not one this proxy gave") from None
        if start < 0:
            raise ProxyError(Code.BAD_REQUEST, f"scroll_id {request.scroll_id!r} is not one this proxy gave")
    elif request.HasField("page_num"):
        if request.page_num < 1:
            raise ProxyError(Code.BAD_REQUEST, f"page_num {request.page_num} must be 1 or more")
        start = (request.page_num - 1) * size
    else:
        start = 0  # the first page (page_size alone sets its size)
    page = found[start:start + size]
    response = apb.ListMessageResponse(status=errors.ok(), scroll_id=str(start + size) if start + size < len(found) else "")
    for msg in page:
        response.messages.append(converter.build_proto_message(msg))
    return response
