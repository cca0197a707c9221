"""SlaveSynchronize: a slave copies its master's metadata (RocketMQ's SlaveSynchronize#syncAll).

The CommitLog reaches a slave over the HA port; topics, subscription groups, consumer offsets
and delay-level offsets do not. Without this copy a promoted slave would serve unknown groups
from offset 0 and redeliver every delayed message. Every 3 s the task checks whether 10 s have
passed since the last full copy, and if so asks the master (its Remoting address) for:

- GET_ALL_TOPIC_CONFIG (21): replaces the table when the master's DataVersion differs;
- GET_ALL_CONSUMER_OFFSET (43): merged over the local offsets (a slave commits none itself); once
  promoted, POP offsets are raised past what the replicated checkpoints show was popped since
  (pop/offset_recovery.py);
- GET_ALL_DELAY_OFFSET (45): delayOffset.json, so delivery resumes where the master was;
- GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): replaces the table when the DataVersion differs;
- AUTH_LIST_USER (3005) and AUTH_LIST_ACL (3010): the ACL 2.0 users and ACLs, replaced when they
  differ (so a promoted slave enforces the same ACLs);
- GET_TIMER_CHECK_POINT (60): the master's timer read time, where a promoted slave delivers from.

Each table is persisted after it changed. One failing request does not stop the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from orbitmq.common import fastjson
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.route import DataVersion
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

CHECK_PERIOD = 3.0
SYNC_ALL_INTERVAL = 10.0
RPC_TIMEOUT = 3.0


class SlaveSyncError(Exception):
    """The master refused or did not answer one of the copy requests."""


def _loads(body: bytes | None, what: str) -> Any:
    if not body:
        raise SlaveSyncError(f"{what}: empty body")
    try:
        return json.loads(bytes(body))
    except ValueError:
        # A Java master writes fastjson (bare integer map keys): parse leniently.
        try:
            return fastjson.loads(bytes(body))
        except ValueError as exc:
            raise SlaveSyncError(f"{what}: body is not JSON: {exc}") from None


async def _install(manager: Any, obj: Any, replace: bool) -> None:
    """Parse like a load (off the loop: a table can hold thousands of entries), then apply under
    the manager's table lock (``replace``: drop the old entries first)."""
    parsed = await asyncio.to_thread(manager.parse, obj)
    with manager._lock:
        if replace:
            table = getattr(manager, "topic_config_table", None)
            if table is None:
                table = manager.subscription_group_table
            table.clear()
        manager.apply(parsed)


class SlaveSynchronize:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.client = RemotingClient(connect_timeout=RPC_TIMEOUT)
        self._task: asyncio.Task[None] | None = None
        self._last_sync_all = 0.0
        # Wall-clock ms at which the last consumer-offset copy was asked for (None: never since
        # start): a promoted master reads the revive log back to about then (pop/offset_recovery.py).
        self.offsets_copied_at_ms: int | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self, master_addr: str | None) -> None:
        """Begin (or keep) copying from ``master_addr``; None waits for an address."""
        self.master_addr = master_addr or self.master_addr
        if self._task is None or self._task.done():
            self._last_sync_all = 0.0
            self._task = asyncio.get_running_loop().create_task(self._run(), name="SlaveSynchronize")

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.client.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_PERIOD)
            if self.master_addr and time.monotonic() - self._last_sync_all > SYNC_ALL_INTERVAL:
                try:
                    await self.sync_all()
                except asyncio.CancelledError:
                    raise
                except Exception:  # one unexpected failure must not end the copying for good
                    log.exception("SlaveSynchronize syncAll from %s failed", self.master_addr)
                self._last_sync_all = time.monotonic()

    # ---- copying ----------------------------------------------------------------------------

    async def _fetch(self, code: int, what: str) -> Any:
        addr = self.master_addr
        if not addr:
            raise SlaveSyncError("no master address")
        try:
            response = await self.client.invoke(addr, RemotingCommand.request(code), RPC_TIMEOUT)
        except (RemotingError, OSError, TimeoutError) as exc:
            raise SlaveSyncError(f"{what} from {addr}: {exc}") from None
        if response.code != ResponseCode.SUCCESS:
            raise SlaveSyncError(f"{what} from {addr}: code {response.code} {response.remark}")
        return await asyncio.to_thread(_loads, response.body, what)

    async def sync_all(self) -> bool:
        """One full copy; True when every part succeeded."""
        ok = True
        for step in (self.sync_topic_config, self.sync_consumer_offset, self.sync_delay_offset,
                     self.sync_subscription_group_config, self.sync_auth_metadata, self.sync_timer_check_point):
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except (SlaveSyncError, ValueError, TypeError, KeyError) as exc:
                ok = False
                log.warning("SlaveSynchronize %s failed: %s", step.__name__, exc)
        return ok

    async def sync_timer_check_point(self) -> None:
        """GET_TIMER_CHECK_POINT (60): a slave's timer read time follows the master's, so once
        promoted it delivers from where the master stopped (services/broker/timer)."""
        timer = getattr(self.broker, "timer_message_store", None)
        addr = self.master_addr
        if timer is None or timer.checkpoint is None or timer.dequeue_active or not addr:
            return
        try:
            response = await self.client.invoke(addr, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT),
                                                RPC_TIMEOUT)
        except (RemotingError, OSError, TimeoutError) as exc:
            raise SlaveSyncError(f"timer checkpoint from {addr}: {exc}") from None
        if response.code != ResponseCode.SUCCESS:
            raise SlaveSyncError(f"timer checkpoint from {addr}: code {response.code} {response.remark}")
        timer.apply_master_checkpoint(response.body or b"")

    async def sync_topic_config(self) -> None:
        obj = await self._fetch(RequestCode.GET_ALL_TOPIC_CONFIG, "topic config")
        manager = self.broker.topic_config_manager
        remote = DataVersion.from_json_dict(obj.get("dataVersion") or {}) if isinstance(obj, dict) else None
        if remote is not None and remote == manager.data_version:
            return
        await _install(manager, obj, replace=True)
        await manager.persist_async()
        log.info("update slave topic config from master %s", self.master_addr)

    async def sync_consumer_offset(self) -> None:
        asked_at = self.broker.now_ms()
        obj = await self._fetch(RequestCode.GET_ALL_CONSUMER_OFFSET, "consumer offset")
        manager = self.broker.consumer_offset_manager
        table, version = await asyncio.to_thread(manager.parse, obj)
        with manager._lock:
            manager.offset_table.update(table)
            manager.data_version.assign_new_one(version)
        self.offsets_copied_at_ms = asked_at
        await manager.persist_async()
        log.debug("update slave consumer offset from master %s", self.master_addr)

    async def sync_delay_offset(self) -> None:
        obj = await self._fetch(RequestCode.GET_ALL_DELAY_OFFSET, "delay offset")
        offsets = self.broker.schedule_message_service.offsets
        await _install(offsets, obj, replace=False)
        await offsets.persist_async()
        log.debug("update slave delay offset from master %s", self.master_addr)

    async def sync_subscription_group_config(self) -> None:
        obj = await self._fetch(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscription group config")
        manager = self.broker.subscription_group_manager
        remote = DataVersion.from_json_dict(obj.get("dataVersion") or {}) if isinstance(obj, dict) else None
        if remote is not None and remote == manager.data_version:
            return
        await _install(manager, obj, replace=True)
        await manager.persist_async()
        log.info("update slave subscription group config from master %s", self.master_addr)

    async def sync_auth_metadata(self) -> None:
        from orbitmq.auth.model import Acl, User
        from orbitmq.broker.auth.store import persist_both

        users = await self._fetch(RequestCode.AUTH_LIST_USER, "users")
        acls = await self._fetch(RequestCode.AUTH_LIST_ACL, "acls")
        store = self.broker.auth_store
        if store.replace_all([User.from_json(u) for u in users], [Acl.from_json(a) for a in acls]):
            await persist_both(store)
            log.info("update slave users and ACLs from master %s", self.master_addr)
