"""Queue offsets and message lookups: GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
SEARCH_OFFSET_BY_TIMESTAMP 29, GET_EARLIEST_MSG_STORETIME 32, VIEW_MESSAGE_BY_ID 33 and
QUERY_MESSAGE 12 (AdminBrokerProcessor's offset calls and QueryMessageProcessor upstream).

Message bodies are raw CommitLog records, exactly what MessageDecoder reads on the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .base import LONG_MAX, Fields, RequestError, ext

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum
UNIQUE_KEY_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


class QueryMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        b = self.broker
        b.register_processor(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        b.register_processor(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        b.register_processor(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp)
        b.register_processor(RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime)
        b.register_processor(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id)
        b.register_processor(RequestCode.QUERY_MESSAGE, self.query_message)

    @staticmethod
    def _topic_queue(request: RemotingCommand) -> tuple[Fields, str, int]:
        f = Fields(request.ext_fields)
        return f, f.str("topic"), f.int("queueId")

    async def get_max_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        _, topic, queue_id = self._topic_queue(request)
        offset = self.broker.message_store.get_max_offset_in_queue(topic, queue_id)
        return request.response_to(ResponseCode.SUCCESS, None, ext(offset=offset))

    async def get_min_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        _, topic, queue_id = self._topic_queue(request)
        offset = self.broker.message_store.get_min_offset_in_queue(topic, queue_id)
        return request.response_to(ResponseCode.SUCCESS, None, ext(offset=offset))

    async def search_offset_by_timestamp(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f, topic, queue_id = self._topic_queue(request)
        timestamp = f.long("timestamp")
        offset = self.broker.message_store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
        return request.response_to(ResponseCode.SUCCESS, None, ext(offset=offset))

    async def get_earliest_msg_storetime(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        _, topic, queue_id = self._topic_queue(request)
        timestamp = self.broker.message_store.get_earliest_message_time(topic, queue_id)
        return request.response_to(ResponseCode.SUCCESS, None, ext(timestamp=timestamp))

    async def view_message_by_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        if f.has("offset"):
            offset = f.long("offset")
        elif f.has("msgId"):
            try:
                _, _, offset = decode_offset_message_id(f.str("msgId"))
            except (ValueError, TypeError) as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad msgId: {exc}") from None
        else:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "the custom field <offset> is null")
        record = self.broker.message_store.select_one_message_by_offset(offset) if offset >= 0 else None
        if not record:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return request.response_to(ResponseCode.SUCCESS, None, None, record)

    async def query_message(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        topic, key = f.str("topic"), f.str("key")
        max_num = f.int("maxNum")
        begin, end = f.long("beginTimestamp"), f.long("endTimestamp")
        if f.str("_UNIQUE_KEY_QUERY", "false") == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        if max_num <= 0:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"maxNum[{max_num}] must be positive")
        if end <= 0:
            end = LONG_MAX
        records, last_ts, last_phy = await self.broker.query_message(topic, key, max_num, begin, end)
        fields = ext(indexLastUpdateTimestamp=last_ts, indexLastUpdatePhyoffset=last_phy)
        if not records:
            return request.response_to(ResponseCode.QUERY_NOT_FOUND,
                                       "can not find message, maybe time range not correct", fields)
        return request.response_to(ResponseCode.SUCCESS, None, fields, b"".join(records))
