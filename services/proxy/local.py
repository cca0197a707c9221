"""proxyMode=local: the proxy inside the broker's process, calling its processors directly.

Upstream's local mode (ProxyStartup with ``-pm local``, the broker started in the proxy's process
from ``-bc``) builds RemotingCommands and hands them to the broker's processors with an in-process
channel (SimpleChannel, SimpleChannelHandlerContext) instead of writing them to a socket
(LocalMessageService#sendMessage, #popMessage, ...). Here the proxy's whole cluster client keeps
working unchanged: ``LocalRemotingClient`` is the RemotingClient the proxy's MQClientAPI calls, and
for the in-process broker's address it returns one end of an in-process channel pair instead of a
TCP connection. A request on that end runs straight through the broker's processor table (with its
ACL guard), a response comes back as the returned object: no encoding, no socket, no loop passes.

The broker's end stands for the proxy, as a connection from it would: heartbeats relayed for gRPC
clients register their producers and consumers on it, so broker-to-client requests
(CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO, NOTIFY_CONSUMER_IDS_CHANGED, ...) invoked on
it run the processors the proxy registered on its RemotingClient, which relay them to the gRPC
clients as in cluster mode (SimpleChannel#writeAndFlush turned into ProxyRelayService calls).

Every other address (another broker set of the cluster, the NameServers) is still reached over
Remoting. Sends and receives choose the local broker's queues of a topic when it has any
(LocalTopicRouteService#getCurrentMessageQueueView routes the local broker only); receipt handles,
transaction ids and recall handles naming another broker set go to that set's master over
Remoting, where upstream's LocalTopicRouteService#getBrokerAddr answers the local broker for any
name (docs/compatibility.md).

The proxy stays stateless towards clients: nothing here outlives a request but the channel pair,
which is the connection cluster mode would hold open.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.closing import CloseNotifying
from orbitmq.remoting.errors import RemotingSendRequestError, RemotingTimeoutError
from orbitmq.remoting.processor import ProcessorTable
from orbitmq.remoting.protocol import RPC_ONEWAY, RPC_TYPE_RESPONSE, RemotingCommand

log = logging.getLogger("orbitmq.proxy.local")



def _as_received(cmd: RemotingCommand, flag: int) -> RemotingCommand:
    """What the other side would decode from ``cmd``'s frame: a fresh command (so neither side
    sees the other's later changes) whose header fields are strings, None ones left out, as the
    codec does, and whose body is bytes."""
    ext = cmd.ext_fields
    for value in ext.values():
        if type(value) is not str:
            ext = {str(k): str(v) for k, v in ext.items() if v is not None}
            break
    else:
        ext = dict(ext)
    body = cmd.body
    if type(body) is not bytes:
        body = bytes(body) if body else b""
    return RemotingCommand(cmd.code, cmd.language, cmd.version, cmd.opaque, flag, cmd.remark, ext, body,
                           cmd.serialize_type)


class LocalChannel(CloseNotifying):
    """One end of an in-process Remoting connection (upstream SimpleChannel): requests invoked on
    it run on the other end's processor table, with the other end as the channel they came on."""

    # whether requests arriving at this end run within their caller's timeout (the proxy's end)
    bounded = False

    def __init__(self, processors: ProcessorTable, local_address: str, remote_address: str) -> None:
        self._processors = processors  # what runs the requests arriving at this end
        self.peer: LocalChannel | None = None
        self.local_address = local_address
        self.remote_address = remote_address
        self._init_closing()
        self._oneway: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"LocalChannel({self.local_address} -> {self.remote_address})"

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:  # noqa: ASYNC109
        """The peer's processor's response. Proxy to broker the processor runs inline and without a
        timer of its own, as LocalMessageService calls processRequest (the gRPC deadline still
        cancels it); broker to proxy (a relay that waits for a gRPC client) within ``timeout``."""
        peer = self.peer
        if self._closed or peer is None:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        received = _as_received(request, request.flag & ~RPC_ONEWAY)
        if peer.bounded:
            try:
                response = await asyncio.wait_for(peer._processors.dispatch(received, peer), timeout)
            except TimeoutError:
                raise RemotingTimeoutError(self.remote_address, timeout, request.opaque) from None
        else:
            response = await peer._processors.dispatch(received, peer)
        if response is None:  # a processor that answers nobody (its channel gone): what a socket gives
            raise RemotingTimeoutError(self.remote_address, timeout, request.opaque)
        answer = _as_received(response, response.flag | RPC_TYPE_RESPONSE)
        answer.opaque = request.opaque
        answer.serialize_type = request.serialize_type
        return answer

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Runs on the peer in a task of its own: the caller does not wait for it."""
        peer = self.peer
        if self._closed or peer is None:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        request.mark_oneway()
        received = _as_received(request, request.flag)
        task = asyncio.ensure_future(self._run_oneway(peer, received))
        self._oneway.add(task)
        task.add_done_callback(self._oneway.discard)

    @staticmethod
    async def _run_oneway(peer: LocalChannel, request: RemotingCommand) -> None:
        try:
            await peer._processors.dispatch(request, peer)
        except asyncio.CancelledError:
            pass

    def _begin_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in list(self._oneway):
            task.cancel()
        self._notify_closed()
        if self.peer is not None:
            self.peer._begin_close()

    async def close(self) -> None:
        self._begin_close()


def channel_pair(client_processors: ProcessorTable, broker_processors: ProcessorTable, broker_addr: str,
                 proxy_addr: str) -> tuple[LocalChannel, LocalChannel]:
    """(the proxy's end, the broker's end) of one in-process connection. Each end runs the requests
    that arrive at it: the broker's end the broker's processors, the proxy's end the processors the
    proxy registered on its RemotingClient (the relays to gRPC clients, which get a timer)."""
    proxy_end = LocalChannel(client_processors, proxy_addr, broker_addr)
    broker_end = LocalChannel(broker_processors, broker_addr, proxy_addr)
    proxy_end.bounded = True
    proxy_end.peer, broker_end.peer = broker_end, proxy_end
    return proxy_end, broker_end


class LocalRemotingClient(RemotingClient):
    """The proxy's RemotingClient in local mode: the in-process broker's address is served by an
    in-process channel (LocalServiceManager's SimpleChannel), every other one over TCP."""

    def __init__(self, broker: Any, proxy_addr: str = "127.0.0.1:0", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.broker = broker  # a started BrokerController of this process
        self.proxy_addr = proxy_addr
        self._local: LocalChannel | None = None

    @property
    def local_addr(self) -> str:
        return self.broker.config.broker_addr

    def is_local(self, addr: str) -> bool:
        return addr == self.local_addr

    def _local_channel(self) -> LocalChannel:
        channel = self._local
        if channel is None or not channel.is_active:
            if self._closed:
                raise RemotingSendRequestError(self.local_addr, "client is closed")
            addr = self.local_addr
            proxy_end, broker_end = channel_pair(self._processors, self.broker.remoting_server.processors, addr,
                                                 self.proxy_addr)
            self.broker.remoting_server.attach(broker_end)
            proxy_end.on_close(lambda ch: self._forget(addr, ch))
            self._local = channel = proxy_end
            # invoke()'s pooled fast path then finds it without a call to get_channel
            self._pool[addr] = [channel]  # type: ignore[list-item]
        return channel

    async def get_channel(self, addr: str) -> Any:
        if addr == self.local_addr:
            return self._local_channel()
        return await super().get_channel(addr)

    async def close_channel(self, addr: str) -> None:
        if addr == self.local_addr and self._local is not None:
            channel, self._local = self._local, None
            self._pool.pop(addr, None)
            await channel.close()
            return
        await super().close_channel(addr)

    async def close(self) -> None:
        await super().close()
        if self._local is not None:
            await self._local.close()
            self._local = None
