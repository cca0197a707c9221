"""AutoSwitchHAConnection: the master's end of one slave's HA connection (RocketMQ's AutoSwitchHAConnection).

Wire format (big-endian, no Remoting framing):
- slave -> master HANDSHAKE, 16 bytes: [int32 state=1][int16 syncFromLastFile][int16 asyncLearner]
  [int64 slaveBrokerId];
- master -> slave HANDSHAKE reply, 20 + 12*N bytes: [int32 1][int32 12*N][int64 maxPhyOffset]
  [int32 lastEpoch] then N x [int32 epoch][int64 startOffset];
- slave -> master TRANSFER ack, 12 bytes: [int32 state=2][int64 slave maxPhyOffset];
- master -> slave TRANSFER, 36-byte header + body: [int32 2][int32 bodySize][int64 offset]
  [int32 epoch][int64 epochStartOffset][int64 confirmOffset] then raw CommitLog bytes.

One task reads the slave's frames (handshake, acks); one writes (handshake reply, then data
batches cut at epoch ends and segment ends, or a heartbeat after haSendHeartbeatInterval of
silence). A malformed frame, or haHousekeepingInterval without a byte, closes this connection
only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import time
from typing import TYPE_CHECKING

from orbitmq.broker.ha.epoch_file import EpochEntry
from orbitmq.broker.ha.flow_monitor import FlowMonitor

if TYPE_CHECKING:
    from orbitmq.broker.ha.ha_service import AutoSwitchHAService

log = logging.getLogger(__name__)


class HAConnectionState(enum.IntEnum):
    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


HANDSHAKE_REQUEST = struct.Struct(">ihhq")  # 16 bytes
HANDSHAKE_REPLY_HEADER = struct.Struct(">iiqi")  # 20 bytes
EPOCH_ITEM = struct.Struct(">iq")  # 12 bytes
TRANSFER_ACK = struct.Struct(">iq")  # 12 bytes
TRANSFER_HEADER = struct.Struct(">iiqiqq")  # 36 bytes
STATE = struct.Struct(">i")
# The master's handshake reply carries at most this many epoch entries (its 1 MiB buffer).
MAX_HANDSHAKE_EPOCHS = 1000
# Without an epoch entry for the transfer start, the master re-checks this often (heartbeats only).
NO_EPOCH_RETRY_S = 0.5
# An idle writer looks for new data this often unless a SYNC_MASTER put wakes it first.
IDLE_POLL_S = 0.1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ProtocolError(Exception):
    """A frame that cannot come from a well-behaved peer: the connection is closed."""


def encode_handshake_reply(max_offset: int, entries: list[EpochEntry]) -> bytes:
    entries = entries[-MAX_HANDSHAKE_EPOCHS:]
    last_epoch = entries[-1].epoch if entries else -1
    parts = [HANDSHAKE_REPLY_HEADER.pack(HAConnectionState.HANDSHAKE, EPOCH_ITEM.size * len(entries),
                                         max_offset, last_epoch)]
    parts.extend(EPOCH_ITEM.pack(e.epoch, e.start_offset) for e in entries)
    return b"".join(parts)


class AutoSwitchHAConnection:
    def __init__(self, service: AutoSwitchHAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.store = service.store
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.current_state = HAConnectionState.READY
        self.slave_id: int | None = None
        self.is_sync_from_last_file = False
        self.is_async_learner = False
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.last_caught_up_time_ms = 0
        self.last_master_max_offset = -1
        self.last_transfer_time_ms = 0
        self.transferred_bytes = 0
        self.flow = FlowMonitor(service.store_config)  # haFlowControlEnable
        self.next_transfer_from_where = -1
        self.last_sent_confirm_offset = -1
        self._handshake_received = asyncio.Event()
        self._request_offset_set = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._read_loop(), name=f"HAConnection-read-{self.client_address}"),
            asyncio.create_task(self._write_loop(), name=f"HAConnection-write-{self.client_address}"),
        ]

    def wakeup(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        """Stop both tasks and the socket; the service forgets this connection."""
        if self._closed:
            return
        self._closed = True
        self.current_state = HAConnectionState.SHUTDOWN
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass
        self.service.remove_connection(self)

    @property
    def closed(self) -> bool:
        return self._closed

    # --- read side -----------------------------------------------------------------------
    async def _read_loop(self) -> None:
        housekeeping = self.service.store_config.ha_housekeeping_interval / 1000
        reader = self.reader
        try:
            while not self._closed:
                head = await asyncio.wait_for(reader.readexactly(4), housekeeping)
                (state,) = STATE.unpack(head)
                if state == HAConnectionState.HANDSHAKE:
                    rest = await asyncio.wait_for(reader.readexactly(HANDSHAKE_REQUEST.size - 4), housekeeping)
                    _s, from_last, learner, slave_id = HANDSHAKE_REQUEST.unpack(head + rest)
                    self._on_handshake(bool(from_last), bool(learner), slave_id)
                elif state == HAConnectionState.TRANSFER:
                    rest = await asyncio.wait_for(reader.readexactly(TRANSFER_ACK.size - 4), housekeeping)
                    _s, offset = TRANSFER_ACK.unpack(head + rest)
                    self._on_ack(offset)
                else:
                    raise ProtocolError(f"unexpected HA state {state}")
        except TimeoutError:
            log.warning("HA connection %s: nothing read for %d ms, closing", self.client_address,
                        self.service.store_config.ha_housekeeping_interval)
        except ProtocolError as exc:
            log.warning("HA connection %s: %s; closing it", self.client_address, exc)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            log.info("HA connection %s closed by the slave", self.client_address)
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("HA connection %s: read failed", self.client_address)
        await self.close()

    def _on_handshake(self, sync_from_last_file: bool, async_learner: bool, slave_id: int) -> None:
        if self._handshake_received.is_set():
            raise ProtocolError("a second handshake on one connection")
        if slave_id < 0:
            raise ProtocolError(f"bad slave broker id {slave_id}")
        self.is_sync_from_last_file = sync_from_last_file
        self.is_async_learner = async_learner
        self.slave_id = slave_id
        self.current_state = HAConnectionState.HANDSHAKE
        log.info("HA handshake from slave %d at %s (syncFromLastFile=%s, asyncLearner=%s)", slave_id,
                 self.client_address, sync_from_last_file, async_learner)
        self._handshake_received.set()
        self.service.on_slave_handshake(self)

    def _on_ack(self, offset: int) -> None:
        if not self._handshake_received.is_set():
            raise ProtocolError("a transfer ack before the handshake")
        if offset < 0:
            raise ProtocolError(f"negative ack offset {offset}")
        self.current_state = HAConnectionState.TRANSFER
        self.slave_ack_offset = offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            self._request_offset_set.set()
            log.info("slave %s requests the CommitLog from %d", self.slave_id, offset)
        service = self.service
        if not self.is_async_learner and offset >= self.last_master_max_offset:
            caught_up = _now_ms() if service.store.get_max_phy_offset() == offset else self.last_transfer_time_ms
            service.update_connection_last_caught_up_time(self.slave_id, caught_up)
            service.maybe_expand_in_sync_state_set(self.slave_id, offset)
        service.update_confirm_offset_when_slave_ack(self.slave_id)
        service.notify_transfer_some()

    # --- write side ----------------------------------------------------------------------
    async def _send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def _wait_wakeup(self, wait_s: float) -> None:
        try:
            await asyncio.wait_for(self._wakeup.wait(), wait_s)
        except TimeoutError:
            pass
        self._wakeup.clear()

    def _start_offset(self) -> int:
        store = self.store
        if self.slave_request_offset != 0:
            return self.slave_request_offset
        max_offset = store.get_max_phy_offset()
        if self.is_sync_from_last_file:
            return max_offset - max_offset % store.config.mapped_file_size_commit_log
        return max(0, store.get_min_phy_offset())

    async def _write_loop(self) -> None:
        service = self.service
        cfg = service.store_config
        try:
            await self._handshake_received.wait()
            await self._send(encode_handshake_reply(self.store.get_max_phy_offset(), service.epoch_cache.all_entries()))
            last_write = _now_ms()
            await self._request_offset_set.wait()
            self.next_transfer_from_where = self._start_offset()
            epoch: EpochEntry | None = None
            while not self._closed:
                if epoch is None:
                    epoch = service.epoch_cache.find_entry_by_offset(self.next_transfer_from_where)
                    if epoch is None:
                        # Nothing to label the data with yet: heartbeats only, look again soon.
                        if _now_ms() - last_write > cfg.ha_send_heartbeat_interval:
                            await self._heartbeat(service.epoch_cache.first_entry())
                            last_write = _now_ms()
                        await asyncio.sleep(NO_EPOCH_RETRY_S)
                        continue
                nxt = service.epoch_cache.next_entry(epoch.epoch)
                if nxt is not None and self.next_transfer_from_where >= nxt.start_offset:
                    epoch = nxt  # the previous epoch is fully sent
                    continue
                sent = await self._transfer_once(epoch, nxt)
                if sent:
                    last_write = _now_ms()
                    continue
                if self.slave_ack_offset >= self.store.get_max_phy_offset():
                    service.update_connection_last_caught_up_time(self.slave_id, _now_ms())
                # A heartbeat also carries a confirm offset that moved since the last frame, so
                # the slave's readers do not wait for the next periodic one (same frame format).
                if (_now_ms() - last_write > cfg.ha_send_heartbeat_interval
                        or self.store.replication.get_confirm_offset() != self.last_sent_confirm_offset):
                    await self._heartbeat(epoch)
                    last_write = _now_ms()
                await self._wait_wakeup(IDLE_POLL_S)
        except asyncio.CancelledError:
            return
        except (ConnectionError, OSError):
            log.info("HA connection %s: write failed, closing", self.client_address)
        except Exception:
            log.exception("HA connection %s: transfer failed", self.client_address)
        await self.close()

    async def _heartbeat(self, epoch: EpochEntry | None) -> None:
        epoch_no, epoch_start = (epoch.epoch, epoch.start_offset) if epoch is not None else (-1, -1)
        confirm = self.store.replication.get_confirm_offset()
        await self._send(TRANSFER_HEADER.pack(HAConnectionState.TRANSFER, 0, self.next_transfer_from_where,
                                              epoch_no, epoch_start, confirm))
        self.last_sent_confirm_offset = confirm

    async def _transfer_once(self, epoch: EpochEntry, nxt: EpochEntry | None) -> bool:
        """Send one batch from next_transfer_from_where if there is data; False when caught up."""
        store = self.store
        start = self.next_transfer_from_where
        max_offset = store.get_max_phy_offset()
        self.last_master_max_offset = max_offset
        end = max_offset if nxt is None else min(max_offset, nxt.start_offset)
        size = min(end - start, self.service.store_config.ha_transfer_batch_size)
        if size <= 0:
            return False
        mfq = store.commit_log.mapped_file_queue
        mf = mfq.find_mapped_file_by_offset(start)
        if mf is None:
            raise ProtocolError(f"CommitLog offset {start} is not on this master any more")
        pos = start - mf.file_from_offset
        size = min(size, mf.read_position - pos)  # committed bytes only (transient store pool)
        if size <= 0:
            if mf.read_position >= mf.file_size:  # the rest of this segment is sent; the next one starts the data
                self.next_transfer_from_where = store.commit_log.roll_next_file(start)
                return True
            return False
        size = await self.flow.allowance(size, self.client_address)  # haFlowControlEnable
        if size == 0:
            return True  # waited for the next second's budget
        data = mf.read(pos, size)
        if data is None:
            return False
        confirm = store.replication.get_confirm_offset()
        self.last_sent_confirm_offset = confirm
        header = TRANSFER_HEADER.pack(HAConnectionState.TRANSFER, len(data), start, epoch.epoch,
                                      epoch.start_offset, confirm)
        self.writer.write(header)
        self.writer.write(data)
        await self.writer.drain()
        self.next_transfer_from_where = start + len(data)
        self.transferred_bytes += len(data)
        self.flow.add_transferred(len(data))
        self.last_transfer_time_ms = _now_ms()
        return True
