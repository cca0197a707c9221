"""Consumer offset stores: on the broker for CLUSTERING (RemoteBrokerOffsetStore) and in a local
file for BROADCASTING (LocalFileOffsetStore).

Both keep the offsets in memory (updated after every consumed batch) and persist them every
persistConsumerOffsetInterval (5 s) and at shutdown. readOffset returns -1 when nothing was ever
committed and -2 when the store could not be read, the values RebalancePushImpl#
computePullFromWhereWithException tells apart.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.common import fastjson
from orbitmq.common.atomic_file import write_file_atomically
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

log = logging.getLogger("orbitmq.remoting_client.offset")

MASTER_ID = 0


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class _Instance(Protocol):
    client_id: str
    api: Any

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this: bool) -> tuple[str, int, bool] | None: ...

    async def update_topic_route(self, topic: str) -> bool: ...


class OffsetStore:
    """The in-memory half both stores share (ControllableOffset: frozen offsets ignore updates)."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueueRef, int] = {}
        self._frozen: set[MessageQueueRef] = set()

    async def load(self) -> None:
        return None

    def update_offset(self, mq: MessageQueueRef, offset: int, increase_only: bool) -> None:
        if mq in self._frozen:
            return
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    def update_and_freeze_offset(self, mq: MessageQueueRef, offset: int) -> None:
        """ControllableOffset#updateAndFreeze: a reset offset later consumption cannot overwrite."""
        self.offset_table[mq] = offset
        self._frozen.add(mq)

    def remove_offset(self, mq: MessageQueueRef) -> None:
        self.offset_table.pop(mq, None)
        self._frozen.discard(mq)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueueRef, int]:
        return {mq: off for mq, off in self.offset_table.items() if not topic or mq.topic == topic}

    async def read_offset(self, mq: MessageQueueRef, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        return await self._read_from_store(mq)

    async def _read_from_store(self, mq: MessageQueueRef) -> int:
        raise NotImplementedError

    async def persist_all(self, mqs: Iterable[MessageQueueRef]) -> None:
        raise NotImplementedError

    async def persist(self, mq: MessageQueueRef) -> None:
        await self.persist_all([mq])


class RemoteBrokerOffsetStore(OffsetStore):
    """CLUSTERING: offsets live on the broker (QUERY/UPDATE_CONSUMER_OFFSET on the master)."""

    def __init__(self, instance: _Instance, group: str) -> None:
        super().__init__(group)
        self.instance = instance

    async def _broker_addr(self, mq: MessageQueueRef, only_this: bool) -> str:
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, only_this)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        return found[0]

    async def _read_from_store(self, mq: MessageQueueRef) -> int:
        try:
            addr = await self._broker_addr(mq, True)
            offset = await self.instance.api.query_consumer_offset(addr, self.group, mq.topic, mq.queue_id)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return -1  # OffsetNotFoundException: the group never committed on this queue
            log.warning("fetch consume offset of %s for %s failed: %s", mq, self.group, exc)
            return -2
        except (MQClientError, RemotingError, OSError) as exc:
            log.warning("fetch consume offset of %s for %s failed: %s", mq, self.group, exc)
            return -2
        self.update_offset(mq, offset, False)
        return offset

    async def update_consume_offset_to_broker(self, mq: MessageQueueRef, offset: int) -> None:
        addr = await self._broker_addr(mq, False)
        await self.instance.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset)

    async def persist_all(self, mqs: Iterable[MessageQueueRef]) -> None:
        wanted = set(mqs)
        if not wanted:
            return
        unused = set()
        for mq, offset in list(self.offset_table.items()):
            if mq in wanted:
                try:
                    await self.update_consume_offset_to_broker(mq, offset)
                except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
                    log.warning("update consume offset of %s for %s to the broker failed: %s", mq, self.group, exc)
            else:
                unused.add(mq)
        for mq in unused:  # RemoteBrokerOffsetStore#persistAll: forget queues no longer assigned
            self.remove_offset(mq)

    async def persist(self, mq: MessageQueueRef) -> None:
        offset = self.offset_table.get(mq)
        if offset is None:
            return
        try:
            await self.update_consume_offset_to_broker(mq, offset)
        except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
            log.warning("update consume offset of %s for %s to the broker failed: %s", mq, self.group, exc)


def local_offset_store_dir() -> Path:
    """LocalFileOffsetStore.LOCAL_OFFSET_STORE_DIR: rocketmq.client.localOffsetStoreDir, else
    ~/.rocketmq_offsets (the system property read here from the environment variable of that name,
    or ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR)."""
    value = (os.environ.get("rocketmq.client.localOffsetStoreDir")
             or os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR"))
    return Path(value) if value else Path.home() / ".rocketmq_offsets"


def encode_offset_table(table: dict[MessageQueueRef, int]) -> str:
    """OffsetSerializeWrapper as fastjson writes it: {"offsetTable":{{"brokerName":…}:offset}}."""
    return fastjson.dumps({"offsetTable": {
        fastjson.message_queue_key(mq.topic, mq.broker_name, mq.queue_id): int(off) for mq, off in table.items()}})


def decode_offset_table(text: str) -> dict[MessageQueueRef, int]:
    data = fastjson.loads(text)
    if not isinstance(data, dict):
        raise ValueError("offsets file is not a JSON object")
    result: dict[MessageQueueRef, int] = {}
    for mq, value in fastjson.message_queue_pairs(data.get("offsetTable") or {}):
        result[MessageQueueRef.from_json_dict(mq)] = int(value)
    return result


class LocalFileOffsetStore(OffsetStore):
    """BROADCASTING: <dir>/<clientId>/<group>/offsets.json (and offsets.json.bak), as upstream."""

    def __init__(self, client_id: str, group: str, store_dir: str | Path | None = None) -> None:
        super().__init__(group)
        base = Path(store_dir) if store_dir is not None else local_offset_store_dir()
        self.store_path = base / client_id / group / "offsets.json"

    def _read_local(self) -> dict[MessageQueueRef, int] | None:
        """LocalFileOffsetStore#readLocalOffset: the file, else (empty or unreadable) its .bak."""
        for path, last in ((self.store_path, False), (self.store_path.with_name("offsets.json.bak"), True)):
            try:
                text = path.read_text("utf-8")
            except OSError:
                text = ""
            if not text:
                if last:
                    return None
                continue
            try:
                return decode_offset_table(text)
            except (ValueError, KeyError, TypeError) as exc:
                if last:
                    raise MQClientError(f"readLocalOffset Exception: {path}: {exc}") from None
                log.warning("read local offsets %s failed, trying the backup: %s", path, exc)
        return None

    async def load(self) -> None:
        table = await asyncio.to_thread(self._read_local)
        if table:
            self.offset_table.update(table)

    async def _read_from_store(self, mq: MessageQueueRef) -> int:
        try:
            table = await asyncio.to_thread(self._read_local)
        except MQClientError:
            return -1
        if table and mq in table:
            self.update_offset(mq, table[mq], False)
            return table[mq]
        return -1

    def _write(self, updates: dict[MessageQueueRef, int]) -> None:
        try:
            table = self._read_local() or {}
        except MQClientError as exc:
            log.error("read local offsets before persisting failed: %s", exc)
            return
        table.update(updates)
        write_file_atomically(self.store_path, encode_offset_table(table).encode("utf-8"), keep_backup=True)

    async def persist_all(self, mqs: Iterable[MessageQueueRef]) -> None:
        wanted = set(mqs)
        updates = {mq: off for mq, off in self.offset_table.items() if mq in wanted}
        if wanted:
            await asyncio.to_thread(self._write, updates)

    async def persist(self, mq: MessageQueueRef) -> None:
        if mq in self.offset_table:
            await asyncio.to_thread(self._write, {mq: self.offset_table[mq]})
