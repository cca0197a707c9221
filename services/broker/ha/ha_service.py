"""AutoSwitchHAService: replication in controller mode (RocketMQ's AutoSwitchHAService).

The broker's ReplicasManager drives it (docs/controller-ha.md "Store <-> HA interface"):
``change_to_master(epoch)`` / ``change_to_slave(addr, epoch, id)`` on role changes,
``set_sync_state_set`` when the controller answers. As master it accepts one
AutoSwitchHAConnection per slave on ``haListenPort``, keeps each slave's ack offset, the
SyncStateSet (expanding it when a slave catches up, shrinking it when one falls behind for
``haMaxTimeSlaveNotCatchup`` or disconnects) and the confirm offset; as slave it runs one
AutoSwitchHAClient.

The store asks it for ``get_confirm_offset()`` (dispatch stops there: ``gates_dispatch``) and,
for SYNC_MASTER sends, ``in_sync_replicas_not_enough()`` and ``wait_for_replicas(offset)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from orbitmq.broker.ha.epoch_file import EpochEntry, EpochFileCache
from orbitmq.broker.ha.group_transfer import (
    ALL_ACK_IN_SYNC_STATE_SET,
    NO_LIMIT,
    GroupTransferService,
    acked_by,
)
from orbitmq.broker.ha.ha_client import AutoSwitchHAClient
from orbitmq.broker.ha.ha_connection import AutoSwitchHAConnection

log = logging.getLogger(__name__)

SyncStateSetListener = Callable[[set[int], int], Awaitable[None]]
# change_to_master waits this often for the dispatch to catch up with the confirm offset.
DISPATCH_WAIT_S = 0.01
# How often the epoch file loses the entries of expired CommitLog files.
EPOCH_PREFIX_CHECK_S = 10.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class HAConnectionStatus:
    """One slave as the master sees it (haStatus)."""

    slave_id: int | None
    address: str
    state: str
    ack_offset: int
    last_caught_up_time_ms: int
    transferred_bytes: int
    is_async_learner: bool
    in_sync: bool


class AutoSwitchHAService:
    # The store dispatches only up to get_confirm_offset() while this service is attached.
    gates_dispatch = True

    def __init__(self, store: Any, broker_config: Any, store_config: Any, epoch_cache: EpochFileCache, *,
                 listen_host: str = "0.0.0.0") -> None:
        self.store = store
        self.broker_config = broker_config
        self.store_config = store_config
        self.epoch_cache = epoch_cache
        self.listen_host = listen_host
        self.listen_port = 0
        self.local_broker_id: int | None = None
        self.sync_state_set_listener: SyncStateSetListener | None = None
        self.is_master = False
        self._local_sync_state_set: set[int] = set()
        self._remote_sync_state_set: set[int] = set()
        self.is_synchronizing = False
        self.sync_state_set_epoch = 0
        self._connections: list[AutoSwitchHAConnection] = []
        self._caught_up_time: dict[int, int] = {}
        self._client: AutoSwitchHAClient | None = None
        self._server: asyncio.AbstractServer | None = None
        self._listener_tasks: set[asyncio.Task[None]] = set()
        self._housekeeping: asyncio.Task[None] | None = None
        self._stopped = False
        self.group_transfer = GroupTransferService(self._acked_offset)

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on haListenPort (0: any free port, then ``listen_port`` tells which)."""
        port = int(self.broker_config.ha_listen_port)
        self._stopped = False
        self._server = await asyncio.start_server(self._on_accept, self.listen_host, port)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        self._housekeeping = asyncio.create_task(self._epoch_prefix_loop(), name="EpochFilePrefixTruncation")
        log.info("AutoSwitchHAService listening on %s:%d", self.listen_host, self.listen_port)

    async def _epoch_prefix_loop(self) -> None:
        """Drop epoch entries whose CommitLog files retention deleted (#truncateEpochFilePrefix)."""
        while True:
            await asyncio.sleep(EPOCH_PREFIX_CHECK_S)
            try:
                await self.truncate_epoch_file_prefix()
            except Exception:
                log.exception("epoch file prefix truncation failed")

    async def truncate_epoch_file_prefix(self) -> None:
        min_offset = self.store.get_min_phy_offset()
        first = self.epoch_cache.first_entry()
        if min_offset > 0 and first is not None and first.end_offset <= min_offset - 1:
            await asyncio.to_thread(self.epoch_cache.truncate_prefix_by_offset, min_offset)

    async def shutdown(self) -> None:
        self._stopped = True  # closing connections now is no SyncStateSet change
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
            self._housekeeping = None
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        await self.destroy_connections()
        if self._client is not None:
            await self._client.shutdown()
        for task in list(self._listener_tasks):
            task.cancel()

    async def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.is_master:
            log.info("HA connection from %s refused: not a master", writer.get_extra_info("peername"))
            writer.close()
            return
        conn = AutoSwitchHAConnection(self, reader, writer)
        self._connections.append(conn)
        log.info("HA connection from slave at %s", conn.client_address)
        conn.start()

    async def destroy_connections(self) -> None:
        for conn in list(self._connections):
            await conn.close()
        self._connections.clear()

    def remove_connection(self, conn: AutoSwitchHAConnection) -> None:
        """A closed connection: its slave leaves the SyncStateSet at once (#removeConnection)."""
        if conn not in self._connections:
            return
        self._connections.remove(conn)
        slave = conn.slave_id
        if slave is None:
            return
        if any(c.slave_id == slave for c in self._connections):
            return  # the slave already reconnected: it did not leave
        self._caught_up_time.pop(slave, None)
        if self.is_master and not self._stopped and not self.store.shutdown_flag and slave in self._local_sync_state_set:
            new = set(self._local_sync_state_set)
            new.discard(slave)
            log.info("slave %d disconnected: shrinking the SyncStateSet to %s", slave, sorted(new))
            self._mark_synchronizing(new)
            self._notify_sync_state_set_changed(new)
        self.group_transfer.notify()

    # --- roles ---------------------------------------------------------------------------
    async def change_to_master(self, master_epoch: int) -> bool:
        """Become master of ``master_epoch``: cut an invalid tail, record the epoch at the max
        offset, and wait until every confirmed record is dispatched."""
        last_epoch = self.epoch_cache.last_epoch()
        if master_epoch < last_epoch:
            log.warning("change to master refused: epoch %d < the last epoch %d", master_epoch, last_epoch)
            return False
        if self.is_master and self._client is None:
            return await self._change_to_master_when_last_role_is_master(master_epoch)
        await self.destroy_connections()
        if self._client is not None:
            await self._client.shutdown()
            self._client = None
        store = self.store
        truncated = store.replication.truncate_invalid_msg()
        self.is_master = True
        if not self._local_sync_state_set and self.local_broker_id is not None:
            self._local_sync_state_set = {self.local_broker_id}
        store.replication.set_confirm_offset(self.compute_confirm_offset())
        cache = self.epoch_cache
        if truncated >= 0:
            await asyncio.to_thread(cache.truncate_suffix_by_offset, truncated)
        await self._append_epoch(master_epoch)
        while not store.dispatch_caught_up():  # noqa: ASYNC110 - the reput task has no event to await
            await asyncio.sleep(DISPATCH_WAIT_S)
        store.replication.recover_topic_queue_table()
        log.info("change to master, epoch %d: truncated at %d, confirm offset %d, max offset %d", master_epoch,
                 truncated, store.replication.get_confirm_offset(), store.get_max_phy_offset())
        return True

    async def _change_to_master_when_last_role_is_master(self, master_epoch: int) -> bool:
        """Re-elected: the slaves stay connected; only the epoch entry is added."""
        cache = self.epoch_cache
        if cache.last_epoch() == master_epoch:
            return True  # the same epoch again: its entry already says where it started
        await self._append_epoch(master_epoch)
        self.store.replication.set_confirm_offset(self.compute_confirm_offset())
        log.info("still master, now of epoch %d from offset %d", master_epoch, self.store.get_max_phy_offset())
        return True

    async def _append_epoch(self, master_epoch: int) -> None:
        """<epoch, maxPhyOffset>, after dropping entries of this epoch or newer."""
        cache = self.epoch_cache
        if cache.last_epoch() >= master_epoch:
            await asyncio.to_thread(cache.truncate_suffix_by_epoch, master_epoch)
        entry = EpochEntry(master_epoch, self.store.get_max_phy_offset())
        if not await asyncio.to_thread(cache.append_entry, entry):
            # Same start as the last kept entry (re-elected with no new data, #9689): the new
            # epoch replaces it, so the entry list still says who wrote what from where on.
            last = cache.last_entry()
            if last is not None and last.start_offset == entry.start_offset and last.epoch < master_epoch:
                await asyncio.to_thread(cache.truncate_suffix_by_offset, entry.start_offset)
                await asyncio.to_thread(cache.append_entry, entry)

    async def change_to_slave(self, master_ha_addr: str | None, master_epoch: int, slave_id: int) -> bool:
        """Become a slave of the master of ``master_epoch`` (address may come later)."""
        last_epoch = self.epoch_cache.last_epoch()
        if master_epoch < last_epoch:
            log.warning("change to slave refused: epoch %d < the last epoch %d", master_epoch, last_epoch)
            return False
        self.is_master = False
        await self.destroy_connections()
        self.local_broker_id = slave_id
        if self._client is not None:
            await self._client.shutdown()
        self._client = AutoSwitchHAClient(self, slave_id)
        self._client.update_master_address(master_ha_addr)
        self._client.start()
        self.group_transfer.notify()
        log.info("change to slave of epoch %d, master HA address %s", master_epoch, master_ha_addr)
        return True

    def update_master_address(self, ha_addr: str | None) -> None:
        if self._client is not None:
            self._client.update_master_address(ha_addr)

    @property
    def ha_client(self) -> AutoSwitchHAClient | None:
        return self._client

    # --- SyncStateSet ----------------------------------------------------------------------
    def set_sync_state_set(self, ids: set[int], epoch: int | None = None) -> None:
        """The controller's set (and its epoch when known): synchronizing ends."""
        self._local_sync_state_set = set(ids)
        self._remote_sync_state_set = set()
        self.is_synchronizing = False
        if epoch is not None:
            self.sync_state_set_epoch = epoch
        if self.is_master:
            self.store.replication.set_confirm_offset(self.compute_confirm_offset())
        self.group_transfer.notify()

    def get_local_sync_state_set(self) -> set[int]:
        return set(self._local_sync_state_set)

    def get_sync_state_set(self) -> set[int]:
        """The local set, united with the proposed one while the controller has not answered
        (upstream #5663: never count on a set the controller may not have applied)."""
        if self.is_synchronizing:
            return self._local_sync_state_set | self._remote_sync_state_set
        return set(self._local_sync_state_set)

    def in_sync_replicas_nums(self) -> int:
        if self.is_synchronizing:
            return max(len(self._local_sync_state_set), len(self._remote_sync_state_set))
        return len(self._local_sync_state_set)

    def _mark_synchronizing(self, proposed: set[int]) -> None:
        self.is_synchronizing = True
        self._remote_sync_state_set = set(proposed)

    def _notify_sync_state_set_changed(self, proposed: set[int]) -> None:
        listener = self.sync_state_set_listener
        if listener is None:
            return
        task = asyncio.get_running_loop().create_task(self._call_listener(listener, set(proposed)))
        self._listener_tasks.add(task)
        task.add_done_callback(self._listener_tasks.discard)

    async def _call_listener(self, listener: SyncStateSetListener, proposed: set[int]) -> None:
        try:
            await listener(proposed, self.sync_state_set_epoch)
        except Exception:
            log.exception("SyncStateSet listener failed for %s", sorted(proposed))

    def on_slave_handshake(self, conn: AutoSwitchHAConnection) -> None:
        """A slave that reconnects replaces its older connection (closed in the background)."""
        for old in list(self._connections):
            if old is not conn and old.slave_id == conn.slave_id:
                log.info("slave %d reconnected from %s: closing its connection from %s", conn.slave_id,
                         conn.client_address, old.client_address)
                task = asyncio.get_running_loop().create_task(old.close())
                self._listener_tasks.add(task)
                task.add_done_callback(self._listener_tasks.discard)

    def update_connection_last_caught_up_time(self, slave_id: int | None, time_ms: int) -> None:
        if slave_id is None:
            return
        if time_ms > self._caught_up_time.get(slave_id, 0):
            self._caught_up_time[slave_id] = time_ms

    def maybe_expand_in_sync_state_set(self, slave_id: int | None, slave_max_offset: int) -> None:
        """A slave that holds everything confirmed and this epoch's start joins (asynchronously
        confirmed by the controller through the listener)."""
        if slave_id is None or not self.is_master:
            return
        current = set(self._local_sync_state_set)
        if slave_id in current:
            return
        if slave_max_offset < self.store.replication.get_confirm_offset():
            return
        last = self.epoch_cache.last_entry()
        if last is not None and slave_max_offset < last.start_offset:
            return
        if self.is_synchronizing and slave_id in self._remote_sync_state_set:
            return  # already proposed; waiting for the controller
        current.add(slave_id)
        log.info("slave %d caught up (ack %d): expanding the SyncStateSet to %s", slave_id, slave_max_offset,
                 sorted(current))
        self._mark_synchronizing(current)
        self._notify_sync_state_set_changed(current)

    def maybe_shrink_sync_state_set(self) -> set[int]:
        """The set without slaves behind for haMaxTimeSlaveNotCatchup or never connected."""
        new = set(self._local_sync_state_set)
        limit = self.store_config.ha_max_time_slave_not_catchup
        now = _now_ms()
        changed = False
        for slave_id, caught_up in list(self._caught_up_time.items()):
            if slave_id in new and now - caught_up > limit:
                new.discard(slave_id)
                changed = True
        for slave_id in list(new):
            if slave_id != self.local_broker_id and slave_id not in self._caught_up_time:
                new.discard(slave_id)
                changed = True
        if self.local_broker_id is not None and self.local_broker_id not in new:
            new.add(self.local_broker_id)
            changed = True
        if changed:
            self._mark_synchronizing(new)
        return new

    # --- confirm offset ------------------------------------------------------------------
    def compute_confirm_offset(self) -> int:
        """min of the acks of the connected SyncStateSet members; frozen while a member has
        no connection (upstream #6662)."""
        store = self.store
        new = store.get_max_phy_offset()
        connected = {c.slave_id for c in self._connections}
        for member in self.get_sync_state_set():
            if member != self.local_broker_id and member not in connected:
                return store.replication.get_confirm_offset_directly()
        sss = self.get_sync_state_set()
        for conn in self._connections:
            if conn.slave_id in sss and conn.slave_ack_offset > 0:
                new = min(new, conn.slave_ack_offset)
        return new

    def update_confirm_offset_when_slave_ack(self, slave_id: int | None) -> None:
        if self.is_master and slave_id in self.get_sync_state_set():
            store = self.store
            new = self.compute_confirm_offset()
            if new != store.replication.get_confirm_offset_directly():
                store.replication.set_confirm_offset(new)
                for conn in self._connections:
                    conn.wakeup()  # the slaves hear of it with their next frame

    def get_confirm_offset(self) -> int:
        """What the store's readers may see (CommitLog.getConfirmOffset, controller mode)."""
        store = self.store
        if self.is_master and (len(self._local_sync_state_set) <= 1 or not self.store_config.all_ack_in_sync_state_set):
            return store.get_max_phy_offset()
        return store.replication.get_confirm_offset_directly()

    # --- send acknowledgement --------------------------------------------------------------
    def in_sync_replicas_not_enough(self) -> bool:
        return self.in_sync_replicas_nums() < self.store_config.min_in_sync_replicas

    def need_ack_nums(self) -> int:
        cfg = self.store_config
        return ALL_ACK_IN_SYNC_STATE_SET if cfg.all_ack_in_sync_state_set else cfg.in_sync_replicas

    async def wait_for_replicas(self, next_offset: int) -> bool:
        """True once the replicas the config asks for hold the log up to ``next_offset``."""
        need = self.need_ack_nums()
        if 0 <= need <= 1:
            return True
        for conn in self._connections:
            conn.wakeup()
        return await self.group_transfer.wait(next_offset, need, self.store_config.slave_timeout)

    def _acked_offset(self, need: int) -> int:
        """GroupTransferService#doWaitTransfer's rule: all-ack = every SyncStateSet member (the master
        counting itself); N = N - 1 slave connections of any kind, learners included."""
        if need == ALL_ACK_IN_SYNC_STATE_SET:
            sss = self.get_sync_state_set()
            if len(sss) <= 1:
                return NO_LIMIT
            return acked_by([c.slave_ack_offset for c in self._connections if c.slave_id in sss], len(sss) - 1)
        return acked_by([c.slave_ack_offset for c in self._connections], need - 1)

    def notify_transfer_some(self) -> None:
        self.group_transfer.notify()

    # --- status --------------------------------------------------------------------------
    def connections(self) -> list[HAConnectionStatus]:
        sss = self.get_sync_state_set()
        return [
            HAConnectionStatus(c.slave_id, c.client_address, c.current_state.name, c.slave_ack_offset,
                               self._caught_up_time.get(c.slave_id, 0) if c.slave_id is not None else 0,
                               c.transferred_bytes, c.is_async_learner, c.slave_id in sss)
            for c in self._connections
        ]

    def connection_objects(self) -> list:
        """The live slave connections themselves (haStatus reads their counters)."""
        return list(self._connections)

    def connection_count(self) -> int:
        return len(self._connections)
