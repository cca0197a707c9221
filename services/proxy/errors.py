"""Errors as RocketMQ's proxy reports them: gRPC OK carrying Status{code, message}.

Every failure a handler meets becomes an apache.rocketmq.v2.Status here (ResponseBuilder's
mapping); a raw stack trace never reaches a client.
"""

from __future__ import annotations

import logging

from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError

log = logging.getLogger("orbitmq.proxy")

Code = pb.Code

# ResponseBuilder.RESPONSE_CODE_MAPPING, plus codes our brokers answer that upstream maps
# through ProxyException/TopicRouteHelper.
_RESPONSE_CODE_MAPPING: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.FLOW_CONTROL: Code.TOO_MANY_REQUESTS,
    ResponseCode.POLLING_FULL: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: Code.INTERNAL_SERVER_ERROR,
}


class ProxyError(Exception):
    """A request the proxy refuses, with the gRPC Code clients expect (GrpcProxyException)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


def code_of_response(remoting_code: int) -> int:
    return _RESPONSE_CODE_MAPPING.get(int(remoting_code), Code.INTERNAL_SERVER_ERROR)


def status(code: int, message: str | None = None) -> pb.Status:
    return pb.Status(code=code, message=message if message is not None else Code.Name(code))


_OK = Code.OK
# Read-only: protobuf copies a sub-message on assignment, so one instance serves every entry.
OK_STATUS = pb.Status(code=_OK, message="OK")


def ok() -> pb.Status:
    return pb.Status(code=_OK, message="OK")


def status_of(exc: BaseException) -> pb.Status:
    """ResponseBuilder.buildStatus(Throwable)."""
    if isinstance(exc, ProxyError):
        return status(exc.code, exc.message)
    if isinstance(exc, MQBrokerError):
        return status(code_of_response(exc.code), exc.remark or str(exc.code))
    if isinstance(exc, MQClientError):
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            return status(Code.TOPIC_NOT_FOUND, exc.message)
        return status(code_of_response(exc.code), exc.message)
    if isinstance(exc, RemotingTimeoutError):
        return status(Code.PROXY_TIMEOUT, str(exc))
    if isinstance(exc, (RemotingConnectError, RemotingError)):
        return status(Code.INTERNAL_SERVER_ERROR, str(exc))
    log.error("internal server error", exc_info=exc)
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
