"""config/delayOffset.json: how far each delay level's queue has been delivered.

The file is {"offsetTable": {"1": 12, …}, "dataVersion": {...}} keyed by level (the
DataVersion moves every delayOffsetUpdateVersionStep updates, as ScheduleMessageService
#updateOffset moves it). Apache RocketMQ writes the keys as
bare numbers (fastjson), which is not strict JSON; loading accepts both forms so a file
copied from an upstream broker is understood.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JsonConfigManager
from orbitmq.common.route import DataVersion

_BARE_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def _rewrite_bare_keys(path: str) -> None:
    """Turn an upstream file with bare integer keys into strict JSON, in place."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return
    try:
        json.loads(text)
        return
    except ValueError:
        pass
    try:
        obj = json.loads(_BARE_INT_KEY.sub(r'\1"\2"\3', text))
    except ValueError:
        return  # really corrupt: the normal load falls back to the .bak
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)


class DelayOffsetManager(JsonConfigManager):
    file_name = "delayOffset.json"

    def __init__(self, config_dir: str, *, update_version_step: int = 200) -> None:
        super().__init__(config_dir)
        self.offset_table: dict[int, int] = {}
        self._offsets_lock = threading.Lock()
        self.data_version = DataVersion()
        self.update_version_step = max(1, update_version_step)  # delayOffsetUpdateVersionStep
        self._updates = 0

    def load(self) -> bool:
        for candidate in (self.path, self.path + ".bak"):
            _rewrite_bare_keys(candidate)
        return super().load()

    def encode(self) -> dict[str, Any]:
        with self._offsets_lock:
            return {"offsetTable": {str(level): offset for level, offset in sorted(self.offset_table.items())},
                    "dataVersion": self.data_version.to_json_dict()}

    def parse(self, obj: Any) -> tuple[dict[int, int], DataVersion | None]:
        if not isinstance(obj, dict):
            raise ValueError("delayOffset.json must hold a JSON object")
        table = obj.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise ValueError("delayOffset.json: offsetTable must be an object")
        version = DataVersion.from_json_dict(obj["dataVersion"]) if isinstance(obj.get("dataVersion"), dict) else None
        return {int(level): int(offset) for level, offset in table.items()}, version

    def apply(self, parsed: tuple[dict[int, int], DataVersion | None]) -> None:
        table, version = parsed
        with self._offsets_lock:
            self.offset_table = dict(table)
            if version is not None:
                self.data_version.assign_new_one(version)

    def get(self, level: int) -> int:
        with self._offsets_lock:
            return self.offset_table.get(level, 0)

    def update(self, level: int, offset: int) -> None:
        with self._offsets_lock:
            self.offset_table[level] = offset
            self._updates += 1
            if self._updates % self.update_version_step == 0:
                self.data_version.next_version()
