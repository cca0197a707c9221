"""DefaultHAService: classic master/slave replication by ``brokerRole`` (with DefaultHAConnection/Client).

No controller, no epochs, no truncation. The master listens on ``haListenPort``; a slave dials
``haMasterAddress`` (or the HA address its NameServer registration returned) and reports its
CommitLog max offset as 8 bytes (int64), at once on connecting, after each appended batch and
every ``haSendHeartbeatInterval``. The master streams ``[int64 phyOffset][int32 bodySize][body]``
from the first report on (0: from the start of its last CommitLog file), batches of at most
``haTransferBatchSize``, a size-0 heartbeat after ``haSendHeartbeatInterval`` idle. Either side
drops a connection that read nothing for ``haHousekeepingInterval``; the slave redials after
``haConnectRetryInterval``.

SYNC_MASTER sends wait for ``inSyncReplicas`` copies (the master included) up to
``slaveTimeout``, then answer FLUSH_SLAVE_TIMEOUT (12) as RocketMQ 5 does; the 4.x answer
SLAVE_NOT_AVAILABLE (11) for "no slave connected" is not produced (nor is it by 5.x: HAService#isSlaveOK
is unused).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from dataclasses import dataclass
from typing import Any

from orbitmq.broker.ha.flow_monitor import FlowMonitor
from orbitmq.broker.ha.group_transfer import GroupTransferService, acked_by
from orbitmq.broker.ha.ha_client import CONNECT_TIMEOUT_S, MAX_BODY_SIZE, split_address
from orbitmq.broker.ha.ha_connection import IDLE_POLL_S, ProtocolError

log = logging.getLogger(__name__)

SLAVE_REPORT = struct.Struct(">q")  # 8 bytes
TRANSFER_HEADER = struct.Struct(">qi")  # 12 bytes


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class ClassicConnectionStatus:
    address: str
    ack_offset: int
    transferred_bytes: int


class DefaultHAConnection:
    """The master's end of one slave's classic HA connection."""

    def __init__(self, service: DefaultHAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.store = service.store
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.transferred_bytes = 0
        self.flow = FlowMonitor(service.store_config)  # haFlowControlEnable
        self.next_transfer_from_where = -1
        self._request_offset_set = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._read_loop(), name=f"DefaultHAConnection-read-{self.client_address}"),
                       asyncio.create_task(self._write_loop(), name=f"DefaultHAConnection-write-{self.client_address}")]

    def wakeup(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self.writer.close()
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await self.writer.wait_closed()
        self.service.remove_connection(self)

    async def _read_loop(self) -> None:
        housekeeping = self.service.store_config.ha_housekeeping_interval / 1000
        try:
            while not self._closed:
                data = await asyncio.wait_for(self.reader.readexactly(SLAVE_REPORT.size), housekeeping)
                (offset,) = SLAVE_REPORT.unpack(data)
                if offset < 0:
                    raise ProtocolError(f"negative slave offset {offset}")
                self.slave_ack_offset = offset
                if self.slave_request_offset < 0:
                    self.slave_request_offset = offset
                    self._request_offset_set.set()
                    log.info("slave %s requests the CommitLog from %d", self.client_address, offset)
                self.service.notify_transfer_some(offset)
        except TimeoutError:
            log.warning("HA connection %s: nothing read for %d ms, closing", self.client_address,
                        self.service.store_config.ha_housekeeping_interval)
        except ProtocolError as exc:
            log.warning("HA connection %s: %s; closing it", self.client_address, exc)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            log.info("HA connection %s closed by the slave", self.client_address)
        except asyncio.CancelledError:
            return
        await self.close()

    async def _write_loop(self) -> None:
        cfg = self.service.store_config
        store = self.store
        try:
            await self._request_offset_set.wait()
            if self.slave_request_offset == 0:
                max_offset = store.get_max_phy_offset()
                self.next_transfer_from_where = max_offset - max_offset % store.config.mapped_file_size_commit_log
            else:
                self.next_transfer_from_where = self.slave_request_offset
            last_write = _now_ms()
            while not self._closed:
                if await self._transfer_once():
                    last_write = _now_ms()
                    continue
                if _now_ms() - last_write > cfg.ha_send_heartbeat_interval:
                    self.writer.write(TRANSFER_HEADER.pack(self.next_transfer_from_where, 0))
                    await self.writer.drain()
                    last_write = _now_ms()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), IDLE_POLL_S)
                self._wakeup.clear()
        except asyncio.CancelledError:
            return
        except (ConnectionError, OSError):
            log.info("HA connection %s: write failed, closing", self.client_address)
        except Exception:
            log.exception("HA connection %s: transfer failed", self.client_address)
        await self.close()

    async def _transfer_once(self) -> bool:
        store = self.store
        start = self.next_transfer_from_where
        size = min(store.get_max_phy_offset() - start, self.service.store_config.ha_transfer_batch_size)
        if size <= 0:
            return False
        mf = store.commit_log.mapped_file_queue.find_mapped_file_by_offset(start)
        if mf is None:
            raise ProtocolError(f"CommitLog offset {start} is not on this master any more")
        pos = start - mf.file_from_offset
        size = min(size, mf.read_position - pos)  # committed bytes only (transient store pool)
        if size <= 0:
            if mf.read_position >= mf.file_size:
                self.next_transfer_from_where = store.commit_log.roll_next_file(start)
                return True
            return False
        size = await self.flow.allowance(size, self.client_address)  # haFlowControlEnable
        if size == 0:
            return True  # waited for the next second's budget
        data = mf.read(pos, size)
        if data is None:
            return False
        self.writer.write(TRANSFER_HEADER.pack(start, len(data)))
        self.writer.write(data)
        await self.writer.drain()
        self.next_transfer_from_where = start + len(data)
        self.transferred_bytes += len(data)
        self.flow.add_transferred(len(data))
        return True


class DefaultHAClient:
    """The slave's end: dial the master, report offsets, append what arrives."""

    def __init__(self, service: DefaultHAService) -> None:
        self.service = service
        self.store = service.store
        self.master_address: str | None = None
        self.current_reported_offset = 0
        self.last_write_time_ms = 0
        self.transferred_bytes = 0
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._address_changed = asyncio.Event()
        self._stopped = False

    def start(self) -> None:
        self._stopped = False
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="DefaultHAClient")

    async def shutdown(self) -> None:
        self._stopped = True
        self._close_socket()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def update_master_address(self, address: str | None) -> None:
        if address == self.master_address:
            return
        log.info("HA master address %s -> %s", self.master_address, address)
        self.master_address = address or None
        self._close_socket()
        self._address_changed.set()

    def _close_socket(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    async def _run(self) -> None:
        while not self._stopped:
            address = self.master_address
            if not address:
                self._address_changed.clear()
                await self._wait_address(1.0)
                continue
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
            if self.master_address != address:
                continue  # a new master: dial it at once
            self._address_changed.clear()
            await self._wait_address(self.service.store_config.ha_connect_retry_interval / 1000)

    async def _wait_address(self, wait_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._address_changed.wait(), wait_s)

    async def _report(self, offset: int) -> None:
        writer = self._writer
        if writer is None:
            raise ConnectionResetError("no connection")
        writer.write(SLAVE_REPORT.pack(offset))
        await writer.drain()
        self.last_write_time_ms = _now_ms()

    async def _heartbeat_loop(self) -> None:
        interval = self.service.store_config.ha_send_heartbeat_interval
        while True:
            await asyncio.sleep(min(1.0, interval / 1000 / 2))
            if _now_ms() - self.last_write_time_ms >= interval:
                await self._report(self.current_reported_offset)

    async def _session(self, address: str) -> None:
        host, port = split_address(address)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        self._writer = writer
        store = self.store
        cfg = self.service.store_config
        self.current_reported_offset = store.get_max_phy_offset()
        await self._report(self.current_reported_offset)
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name="DefaultHAClient-heartbeat")
        housekeeping = cfg.ha_housekeeping_interval / 1000
        max_body = max(MAX_BODY_SIZE, cfg.ha_transfer_batch_size)
        try:
            while not self._stopped:
                head = await asyncio.wait_for(reader.readexactly(TRANSFER_HEADER.size), housekeeping)
                offset, size = TRANSFER_HEADER.unpack(head)
                if size < 0 or size > max_body or offset < 0:
                    raise ProtocolError(f"transfer frame with body size {size} at offset {offset}")
                body = await asyncio.wait_for(reader.readexactly(size), housekeeping) if size else b""
                local_max = store.get_max_phy_offset()
                if local_max != 0 and local_max != offset:
                    raise ProtocolError(f"master sent offset {offset}, the local max is {local_max}")
                if size:
                    if not store.replication.append_to_commit_log(offset, body):
                        raise ProtocolError(f"cannot append {size} bytes at {offset}")
                    self.transferred_bytes += size
                new_max = store.get_max_phy_offset()
                if new_max > self.current_reported_offset:
                    self.current_reported_offset = new_max
                    await self._report(new_max)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await heartbeat


class DefaultHAService:
    # Classic HA never hides records from readers: the confirm offset is the CommitLog max.
    gates_dispatch = False

    def __init__(self, store: Any, broker_config: Any, store_config: Any, *, listen_host: str = "0.0.0.0") -> None:
        self.store = store
        self.broker_config = broker_config
        self.store_config = store_config
        self.listen_host = listen_host
        self.listen_port = 0
        self.push_to_slave_max_offset = 0
        self._connections: list[DefaultHAConnection] = []
        self._server: asyncio.AbstractServer | None = None
        self._client = DefaultHAClient(self)
        self.group_transfer = GroupTransferService(self._acked_offset)

    async def start(self) -> None:
        """Listen on haListenPort (0: any free port, then ``listen_port`` tells which)."""
        self._server = await asyncio.start_server(self._on_accept, self.listen_host, int(self.broker_config.ha_listen_port))
        self.listen_port = self._server.sockets[0].getsockname()[1]
        log.info("DefaultHAService listening on %s:%d", self.listen_host, self.listen_port)

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        for conn in list(self._connections):
            await conn.close()
        await self._client.shutdown()

    async def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = DefaultHAConnection(self, reader, writer)
        self._connections.append(conn)
        log.info("HA connection from slave at %s", conn.client_address)
        conn.start()

    def remove_connection(self, conn: DefaultHAConnection) -> None:
        if conn in self._connections:
            self._connections.remove(conn)
        self.group_transfer.notify()

    def update_master_address(self, ha_addr: str | None) -> None:
        """A slave's master: dial it (and keep redialling) from now on."""
        self._client.update_master_address(ha_addr)
        if ha_addr:
            self._client.start()

    @property
    def ha_client(self) -> DefaultHAClient:
        return self._client

    # --- store hooks ---------------------------------------------------------------------
    def get_confirm_offset(self) -> int:
        return self.store.get_max_phy_offset()

    def in_sync_replicas_not_enough(self) -> bool:
        return False  # minInSyncReplicas is a controller-mode check

    def in_sync_replicas_nums(self) -> int:
        return 1 + len(self._connections)

    async def wait_for_replicas(self, next_offset: int) -> bool:
        need = self.store_config.in_sync_replicas
        if need <= 1:
            return True
        for conn in self._connections:
            conn.wakeup()
        return await self.group_transfer.wait(next_offset, need, self.store_config.slave_timeout)

    def _acked_offset(self, need: int) -> int:
        """The highest offset ``need`` copies (the master's included) hold."""
        return acked_by([c.slave_ack_offset for c in self._connections], need - 1)

    def notify_transfer_some(self, offset: int) -> None:
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        self.group_transfer.notify()

    def connections(self) -> list[ClassicConnectionStatus]:
        return [ClassicConnectionStatus(c.client_address, c.slave_ack_offset, c.transferred_bytes)
                for c in self._connections]

    def connection_objects(self) -> list:
        """The live slave connections themselves (haStatus reads their counters)."""
        return list(self._connections)

    def connection_count(self) -> int:
        return len(self._connections)
