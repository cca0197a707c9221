"""KVConfigManager: namespace -> {key: value}, the only state a NameServer keeps on disk.

The file has RocketMQ's kvConfig.json shape, {"configTable": {namespace: {key: value}}}, so a
file written by an Apache RocketMQ NameServer loads here. Writes go to a temporary file that is
fsynced and renamed over the old one, in a worker thread, so a crash never leaves half a file
and the event loop never blocks on the disk.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from orbitmq.common import atomic_file
from orbitmq.common.atomic_file import NewestSnapshotWriter
from orbitmq.common.route import KVTable, RouteDataError, parse_json

log = logging.getLogger("orbitmq.namesrv")


class KVConfigManager:
    def __init__(self, kv_config_path: str) -> None:
        self.kv_config_path = kv_config_path
        self.config_table: dict[str, dict[str, str]] = {}
        self._writer = NewestSnapshotWriter()

    def load(self) -> None:
        """Read the file if it exists; a corrupt file is an error, not silently an empty table."""
        path = Path(self.kv_config_path)
        if not path.exists():
            return
        try:
            raw = parse_json(path.read_bytes())
        except RouteDataError as exc:
            raise ValueError(f"KV config file {path} is not valid JSON: {exc}") from None
        table = raw.get("configTable") if isinstance(raw, dict) else None
        if not isinstance(table, dict):
            raise ValueError(f"KV config file {path} has no configTable object")
        for namespace, kvs in table.items():
            if isinstance(kvs, dict):
                self.config_table[str(namespace)] = {str(k): str(v) for k, v in kvs.items()}
        log.info("load KV config table OK")

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        table = self.config_table.get(namespace)
        if table is None:
            table = self.config_table[namespace] = {}
            log.info("putKVConfig create new Namespace %s", namespace)
        prev = table.get(key)
        table[key] = value
        log.info("putKVConfig %s config item, Namespace: %s Key: %s Value: %s",
                 "update" if prev is not None else "create new", namespace, key, value)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None and key in table:
            value = table.pop(key)
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        table = self.config_table.get(namespace)
        return table.get(key) if table is not None else None

    def get_kv_list_by_namespace(self, namespace: str) -> bytes | None:
        """KVTable JSON of one namespace, or None when it does not exist."""
        table = self.config_table.get(namespace)
        return KVTable(dict(table)).encode() if table is not None else None

    def print_all_periodically(self) -> None:
        """KVConfigManager#printAllPeriodically: every entry in the log, every 10 minutes, so the
        NameServer log alone shows what the KV table held at any time."""
        log.info("--------------------------------------------------------")
        log.info("configTable SIZE: %d", len(self.config_table))
        for namespace, table in self.config_table.items():
            for key, value in table.items():
                log.info("configTable NS: %s Key: %s Value: %s", namespace, key, value)

    def encode(self) -> bytes:
        return json.dumps({"configTable": self.config_table}, indent=1, ensure_ascii=False).encode("utf-8")

    async def persist(self) -> None:
        """Write the current table off the loop; of concurrent calls the newest table wins."""
        data = self.encode()
        try:
            await self._writer.write_async(self.kv_config_path, atomic_file.write_file_atomically, data)
        except OSError:
            log.exception("persist kvconfig Exception, %s", self.kv_config_path)
            raise
