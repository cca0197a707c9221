"""Store results -> Remoting responses (``SendMessageProcessor#handlePutMessageResult``'s
PutMessageStatus mapping)."""

from __future__ import annotations

from typing import Any

from orbitmq.remoting.codes import ResponseCode

from .base import ext

# status name -> (response code, stored?, remark)
_PUT_STATUS: dict[str, tuple[int, bool, str | None]] = {
    "PUT_OK": (ResponseCode.SUCCESS, True, None),
    "FLUSH_DISK_TIMEOUT": (ResponseCode.FLUSH_DISK_TIMEOUT, True, None),
    "FLUSH_SLAVE_TIMEOUT": (ResponseCode.FLUSH_SLAVE_TIMEOUT, True, None),
    "SLAVE_NOT_AVAILABLE": (ResponseCode.SLAVE_NOT_AVAILABLE, True, None),
    "CREATE_MAPEDFILE_FAILED": (ResponseCode.SYSTEM_ERROR, False,
                                "create mapped file failed, server is busy or broken."),
    "CREATE_MAPPED_FILE_FAILED": (ResponseCode.SYSTEM_ERROR, False,
                                  "create mapped file failed, server is busy or broken."),
    "MESSAGE_ILLEGAL": (ResponseCode.MESSAGE_ILLEGAL, False,
                        "the message is illegal, maybe msg body or properties length not matched. "
                        "msg body length limit 4m, msg properties length limit 32k."),
    "PROPERTIES_SIZE_EXCEEDED": (ResponseCode.MESSAGE_ILLEGAL, False,
                                 "the message is illegal, maybe msg body or properties length not matched. "
                                 "msg body length limit 4m, msg properties length limit 32k."),
    "SERVICE_NOT_AVAILABLE": (ResponseCode.SERVICE_NOT_AVAILABLE, False,
                              "service not available now. It may be caused by one of the following reasons: "
                              "the broker's disk is full, messages are put to the slave, message store has "
                              "been shut down, etc."),
    "OS_PAGECACHE_BUSY": (ResponseCode.SYSTEM_ERROR, False,
                          "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    "OS_PAGE_CACHE_BUSY": (ResponseCode.SYSTEM_ERROR, False,
                           "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    "DISK_FULL": (ResponseCode.SERVICE_NOT_AVAILABLE, False,
                  "service not available now, maybe disk full, please check the broker's disk usage."),
    "IN_SYNC_REPLICAS_NOT_ENOUGH": (ResponseCode.SYSTEM_ERROR, False, "in-sync replicas not enough"),
    "LMQ_CONSUME_QUEUE_NUM_EXCEEDED": (ResponseCode.SYSTEM_ERROR, False,
                                       "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and "
                                       "enableMultiDispatch, lmq consumeQueue num exceed maxLmqConsumeQueueNum "
                                       "config num, default limit 2w."),
    "UNKNOWN_ERROR": (ResponseCode.SYSTEM_ERROR, False, "UNKNOWN_ERROR"),
    # Timer messages: the remark with the configured limits comes with the result (``remark``).
    "WHEEL_TIMER_FLOW_CONTROL": (ResponseCode.SYSTEM_ERROR, False, "timer message is under flow control"),
    "WHEEL_TIMER_MSG_ILLEGAL": (ResponseCode.MESSAGE_ILLEGAL, False, "timer message illegal"),
    "WHEEL_TIMER_NOT_ENABLE": (ResponseCode.SYSTEM_ERROR, False, "accurate timer message is not enabled"),
}


def status_name(status: Any) -> str:
    return getattr(status, "name", None) or str(status)


def map_put_result(result: Any, queue_id: int, batch: bool) -> tuple[int, str | None, dict[str, str]]:
    """(code, remark, response extFields) for a PutMessageResult."""
    if result is None:
        return ResponseCode.SYSTEM_ERROR, "store putMessage return null", {}
    name = status_name(result.status)
    code, stored, remark = _PUT_STATUS.get(name, (ResponseCode.SYSTEM_ERROR, False, "UNKNOWN_ERROR DEFAULT"))
    if not stored:
        return code, getattr(result, "remark", None) or remark, {}
    append = result.append_message_result
    return code, remark, ext(msgId=append.msg_id, queueId=queue_id, queueOffset=append.logics_offset)
