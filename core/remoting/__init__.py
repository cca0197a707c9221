"""RocketMQ Remoting protocol: command codec, codes, typed headers, asyncio server and client."""

from orbitmq.remoting.channel import Channel
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from orbitmq.remoting.headers import CommandCustomHeader
from orbitmq.remoting.protocol import LanguageCode, RemotingCommand, SerializeType
from orbitmq.remoting.server import RemotingServer

__all__ = [
    "Channel",
    "CommandCustomHeader",
    "LanguageCode",
    "RemotingClient",
    "RemotingCommand",
    "RemotingCommandError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RemotingTooMuchRequestError",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
]
