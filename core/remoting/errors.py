"""Exceptions raised by the Remoting layer, named after RocketMQ's RemotingException family."""


class RemotingError(Exception):
    """Base class: anything that went wrong talking Remoting."""


class RemotingCommandError(RemotingError):
    """A frame, command or custom header could not be encoded or decoded."""


class RemotingConnectError(RemotingError):
    """No connection to the address could be established (or it is gone)."""

    def __init__(self, addr: str, cause: BaseException | None = None) -> None:
        detail = f": {cause}" if cause is not None else ""
        super().__init__(f"connect to <{addr}> failed{detail}")
        self.addr = addr


class RemotingTimeoutError(RemotingError):
    """No response arrived for a request within its timeout."""

    def __init__(self, addr: str, timeout: float, opaque: int | None = None) -> None:
        what = f" opaque={opaque}" if opaque is not None else ""
        super().__init__(f"wait response on <{addr}> timeout {timeout * 1000:.0f}ms{what}")
        self.addr = addr
        self.timeout = timeout


class RemotingSendRequestError(RemotingError):
    """The connection broke before the response arrived."""

    def __init__(self, addr: str, cause: BaseException | str | None = None) -> None:
        super().__init__(f"send request to <{addr}> failed: {cause}")
        self.addr = addr


class RemotingTooMuchRequestError(RemotingError):
    """Too many requests are in flight on this client (back-pressure)."""
