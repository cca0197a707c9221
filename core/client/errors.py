"""Errors of the high-level client, named after RocketMQ's MQBrokerException/MQClientException.

A broker's refusal keeps its Remoting response code so callers (the proxy's error mapping, the
admin CLI) can translate it into their own protocol's terms.
"""

from __future__ import annotations


class MQClientError(Exception):
    """Something went wrong on the client side before or after talking to a server."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class MQBrokerError(Exception):
    """A server answered with a non-success Remoting response code."""

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        where = f" BROKER: {addr}" if addr else ""
        super().__init__(f"CODE: {code} DESC: {remark}{where}")
        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
