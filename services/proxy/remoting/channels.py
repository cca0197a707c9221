"""Each Remoting client's own connections from the proxy to the brokers.

A broker knows a client by the connection its heartbeat came on (ConsumerGroupInfo keys its
clients by channel), and sends what is for the client on that connection: NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE, GET_CONSUMER_RUNNING_INFO, RESET_CONSUMER_CLIENT_OFFSET, ... So every
connection to the proxy's Remoting port gets connections of its own to the brokers it talks to:
the brokers see one client per connection, as without the proxy (two clients of one group on one
shared connection would be one member to them, and rebalance would hand both every queue), and
whatever a broker sends on it goes back to that client's connection to the proxy, unchanged but
for a fresh opaque. When the client's connection closes, its broker connections close, and the
brokers unregister the client as they do when a client goes away (ClientHousekeepingService).

Upstream's proxy instead registers the client in its own ConsumerManager and answers
GET_CONSUMER_LIST_BY_GROUP from it (shared between proxies by its HeartbeatSyncer); here the brokers
stay the only holders of group membership, so any number of proxies agree without syncing, and the
proxy keeps nothing beyond open connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RPC_ONEWAY, RemotingCommand, next_opaque

if TYPE_CHECKING:
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.remoting.channel import Channel

log = logging.getLogger("orbitmq.proxy.remoting")


# A client sends one HEART_BEAT per broker set in its route table, back to back, all to the proxy's
# one address; each is forwarded to every master. A repeat of the same body on the same connection
# this soon is answered with the first one's answer instead.
HEARTBEAT_REPEAT_SECONDS = 1.0


class BrokerLinks:
    """Remoting client connection -> the RemotingClient holding its connections to the brokers."""

    def __init__(self, cluster: ClusterService, relay_timeout_seconds: float) -> None:
        self.cluster = cluster
        self.relay_timeout = relay_timeout_seconds
        self._links: dict[Channel, RemotingClient] = {}
        self._closing: set[asyncio.Task[None]] = set()
        # connection -> (heartbeat body, when forwarded, the answer)
        self._heartbeats: dict[Channel, tuple[bytes, float, RemotingCommand]] = {}

    def repeated_heartbeat(self, inbound: Channel, body: bytes) -> RemotingCommand | None:
        """The answer to the same heartbeat forwarded on this connection within HEARTBEAT_REPEAT_SECONDS."""
        last = self._heartbeats.get(inbound)
        if last is None or last[0] != body or time.monotonic() - last[1] > HEARTBEAT_REPEAT_SECONDS:
            return None
        return replace(last[2], ext_fields=dict(last[2].ext_fields or {}))

    def heartbeat_forwarded(self, inbound: Channel, body: bytes, answer: RemotingCommand) -> None:
        if inbound in self._links:  # a connection that closed meanwhile keeps nothing here
            self._heartbeats[inbound] = (body, time.monotonic(), answer)

    def __len__(self) -> int:
        return len(self._links)

    def link(self, inbound: Channel) -> RemotingClient:
        client = self._links.get(inbound)
        if client is None:
            shared = self.cluster.api.remoting
            client = RemotingClient(connect_timeout=shared.connect_timeout)
            client.ssl_context = shared.ssl_context  # tls.enable, as the proxy's own connections
            # No rpc_hook: requests keep the client's own signature (the brokers check it).
            client.register_default_processor(self._back_to(inbound))
            self._links[inbound] = client
            inbound.on_close(self._on_close)
        return client

    def _on_close(self, inbound: Channel) -> None:
        self._heartbeats.pop(inbound, None)
        client = self._links.pop(inbound, None)
        if client is not None:
            task = asyncio.get_running_loop().create_task(client.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def shutdown(self) -> None:
        self._heartbeats.clear()
        links, self._links = list(self._links.values()), {}
        await asyncio.gather(*(c.close() for c in links), *list(self._closing), return_exceptions=True)

    def _back_to(self, inbound: Channel) -> Any:
        """A broker's request on one of the client's connections, relayed to the client."""
        async def relay(request: RemotingCommand, broker: Any) -> RemotingCommand | None:
            fields = request.ext_fields
            if request.code == RequestCode.CHECK_TRANSACTION_STATE and not (fields or {}).get("bname"):
                # A 5.x client puts the check's bname in its END_TRANSACTION, which the proxy routes by.
                name = await self._broker_name_of(getattr(broker, "remote_address", ""))
                if name:
                    fields = {**(fields or {}), "bname": name}
            command = replace(request, opaque=next_opaque(), ext_fields=dict(fields or {}))
            try:
                if request.flag & RPC_ONEWAY:
                    await inbound.invoke_oneway(command)
                    return None
                return await inbound.invoke(command, self.relay_timeout)
            except RemotingError as exc:
                log.info("request %s for the client at %s lost: %s", request.code, inbound.remote_address, exc)
                if request.flag & RPC_ONEWAY:
                    return None
                return request.response_to(ResponseCode.SYSTEM_ERROR,
                                           f"the client at {inbound.remote_address} did not answer: {exc}")
        return relay

    async def _broker_name_of(self, addr: str) -> str | None:
        with contextlib.suppress(Exception):
            for bd in await self.cluster.all_masters():
                if addr in bd.broker_addrs.values():
                    return bd.broker_name
        return None
