"""AutoSwitchHAClient: a slave's end of the AutoSwitch HA protocol (RocketMQ's AutoSwitchHAClient).

Per connection attempt: READY (cut a partially written CommitLog tail and its epoch suffix),
dial the master, HANDSHAKE (send 16 bytes, read the master's epoch list within 5 s), truncate
to the consistent point of the two epoch lists, then TRANSFER: append the master's batches at
exactly the local max offset, record new epochs, take the confirm offset from each header
(never past the local max) and ack the new max. Any failure closes the socket and retries
after ``haConnectRetryInterval`` (RocketMQ: 5 s).

Unlike upstream, which sends its first TRANSFER ack at the next heartbeat (up to 5 s after the
handshake: AutoSwitchHAClient#reportSlaveMaxOffset reports only an offset larger than the one
truncated to), the client acks right after the truncation: the master starts transferring that
much earlier, and the frames are the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from orbitmq.broker.ha.epoch_file import EpochEntry
from orbitmq.broker.ha.ha_connection import (
    EPOCH_ITEM,
    HANDSHAKE_REPLY_HEADER,
    HANDSHAKE_REQUEST,
    MAX_HANDSHAKE_EPOCHS,
    TRANSFER_ACK,
    TRANSFER_HEADER,
    HAConnectionState,
    ProtocolError,
)

if TYPE_CHECKING:
    from orbitmq.broker.ha.ha_service import AutoSwitchHAService

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 3.0
# The slave's read buffer (4 MiB): a bigger TRANSFER body is not from a well-behaved master.
MAX_BODY_SIZE = 4 * 1024 * 1024


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad HA address {address!r}")
    return host, int(port)


class AutoSwitchHAClient:
    def __init__(self, service: AutoSwitchHAService, broker_id: int) -> None:
        self.service = service
        self.store = service.store
        self.epoch_cache = service.epoch_cache
        self.broker_id = broker_id
        self.master_ha_address: str | None = None
        self.current_state = HAConnectionState.READY
        self.current_reported_offset = 0
        self.current_received_epoch = -1
        self.last_read_time_ms = 0
        self.last_write_time_ms = 0
        self.transferred_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._address_changed = asyncio.Event()
        self._stopped = False

    # --- control -------------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="AutoSwitchHAClient")

    async def shutdown(self) -> None:
        self._stopped = True
        self.current_state = HAConnectionState.SHUTDOWN
        self._close_socket()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def update_master_address(self, address: str | None) -> None:
        """A new master HA address drops the current connection; the next attempt dials it."""
        if address == self.master_ha_address:
            return
        log.info("HA master address %s -> %s", self.master_ha_address, address)
        self.master_ha_address = address or None
        self._close_socket()
        self._address_changed.set()

    def _close_socket(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    # --- main loop -----------------------------------------------------------------------
    async def _run(self) -> None:
        retry = self.service.store_config.ha_connect_retry_interval / 1000
        while not self._stopped:
            address = self.master_ha_address
            if not address:
                self._address_changed.clear()
                await self._wait_address(1.0)
                continue
            self.current_state = HAConnectionState.READY
            cut = self.store.replication.truncate_invalid_msg()
            if cut >= 0:
                self.epoch_cache.truncate_suffix_by_offset(cut)
            try:
                await self._session(address)
            except asyncio.CancelledError:
                raise
            except ProtocolError as exc:
                log.warning("HA client: %s; reconnecting", exc)
            except (ConnectionError, OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.info("HA client: connection to master %s lost: %r", address, exc)
            except Exception:
                log.exception("HA client: transfer from %s failed", address)
            finally:
                self._close_socket()
            if self._stopped:
                break
            if self.master_ha_address != address:
                continue  # a new master: dial it at once
            self.current_state = HAConnectionState.READY
            self._address_changed.clear()
            await self._wait_address(retry)

    async def _wait_address(self, wait_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._address_changed.wait(), wait_s)

    async def _session(self, address: str) -> None:
        host, port = split_address(address)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        self._writer = writer
        cfg = self.service.store_config
        # HANDSHAKE
        self.current_state = HAConnectionState.HANDSHAKE
        writer.write(HANDSHAKE_REQUEST.pack(HAConnectionState.HANDSHAKE, int(cfg.sync_from_last_file),
                                            int(cfg.async_learner), self.broker_id))
        await writer.drain()
        self.last_write_time_ms = _now_ms()
        master_max, master_entries = await asyncio.wait_for(self._read_handshake_reply(reader), HANDSHAKE_TIMEOUT_S)
        if not self._truncate(master_entries, master_max):
            raise ProtocolError("no consistent point with the master's epochs")
        # TRANSFER
        self.current_state = HAConnectionState.TRANSFER
        self.current_received_epoch = -1
        await self._report(self.current_reported_offset)
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="AutoSwitchHAClient-heartbeat")
        try:
            await self._transfer_loop(reader)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await heartbeat

    async def _read_handshake_reply(self, reader: asyncio.StreamReader) -> tuple[int, list[EpochEntry]]:
        head = await reader.readexactly(HANDSHAKE_REPLY_HEADER.size)
        state, body_size, master_max, _last_epoch = HANDSHAKE_REPLY_HEADER.unpack(head)
        if state != HAConnectionState.HANDSHAKE:
            raise ProtocolError(f"handshake reply in state {state}")
        if body_size < 0 or body_size % EPOCH_ITEM.size or body_size > EPOCH_ITEM.size * MAX_HANDSHAKE_EPOCHS:
            raise ProtocolError(f"handshake reply with a body of {body_size} bytes")
        body = await reader.readexactly(body_size)
        entries = [EpochEntry(e, s) for e, s in EPOCH_ITEM.iter_unpack(body)]
        self.last_read_time_ms = _now_ms()
        return master_max, entries

    def _truncate(self, master_entries: list[EpochEntry], master_max: int) -> bool:
        """AutoSwitchHAClient#doTruncate: cut the local log back to where it agrees with the master's."""
        store = self.store
        local_max = store.get_max_phy_offset()
        if self.epoch_cache.size() == 0:
            # A new replica (or an epoch file lost on upgrade): no truncation, report the max.
            self.current_reported_offset = local_max
            return True
        point = self.epoch_cache.find_consistent_point(local_max, master_entries, master_max)
        if point < 0:
            log.error("no consistent point between the local epochs %s and the master's %s: manual repair needed",
                      self.epoch_cache.all_entries(), master_entries)
            return False
        if point < local_max:
            log.info("truncating the local CommitLog from %d to the consistent point %d", local_max, point)
        if not store.replication.truncate_files(point):
            return False
        self.epoch_cache.truncate_suffix_by_offset(point)
        self.current_reported_offset = min(point, store.get_max_phy_offset())
        return True

    async def _report(self, offset: int) -> None:
        writer = self._writer
        if writer is None:
            raise ConnectionResetError("no connection")
        writer.write(TRANSFER_ACK.pack(HAConnectionState.TRANSFER, offset))
        await writer.drain()
        self.last_write_time_ms = _now_ms()

    async def _heartbeat_loop(self) -> None:
        interval = self.service.store_config.ha_send_heartbeat_interval
        while True:
            await asyncio.sleep(min(1.0, interval / 1000 / 2))
            if _now_ms() - self.last_write_time_ms >= interval:
                await self._report(self.current_reported_offset)

    async def _transfer_loop(self, reader: asyncio.StreamReader) -> None:
        cfg = self.service.store_config
        housekeeping = cfg.ha_housekeeping_interval / 1000
        max_body = max(MAX_BODY_SIZE, cfg.ha_transfer_batch_size)
        store = self.store
        while not self._stopped:
            head = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), housekeeping)
            state, size, offset, epoch, epoch_start, confirm = TRANSFER_HEADER.unpack(head)
            if state != HAConnectionState.TRANSFER:
                raise ProtocolError(f"transfer frame in state {state}")
            if size < 0 or size > max_body or offset < 0:
                raise ProtocolError(f"transfer frame with body size {size} at offset {offset}")
            body = await asyncio.wait_for(reader.readexactly(size), housekeeping) if size else b""
            self.last_read_time_ms = _now_ms()
            local_max = store.get_max_phy_offset()
            if local_max != 0 and local_max != offset:
                raise ProtocolError(f"master sent offset {offset}, the local max is {local_max}")
            # Every TRANSFER frame, a heartbeat (size 0) too, names the master's epoch at this
            # offset (AutoSwitchHAClient's HAReadSocketService, TRANSFER case): a slave that caught
            # up with a master elected at its own end of log learns the new epoch from heartbeats,
            # as upstream's does, before any message is written under it.
            if epoch != self.current_received_epoch and epoch >= 0:
                self.current_received_epoch = epoch
                if epoch > self.epoch_cache.last_epoch():
                    self.epoch_cache.append_entry(EpochEntry(epoch, epoch_start))
            if size:
                if not store.replication.append_to_commit_log(offset, body):
                    raise ProtocolError(f"cannot append {size} bytes at {offset}")
                self.transferred_bytes += size
            store.replication.set_confirm_offset(min(confirm, store.get_max_phy_offset()))
            new_max = store.get_max_phy_offset()
            if new_max > self.current_reported_offset:
                self.current_reported_offset = new_max
                await self._report(new_max)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
