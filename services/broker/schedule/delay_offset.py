"""config/delayOffset.json: how far each delay level's queue has been delivered.

The file is {"offsetTable": {"1": 12, …}} keyed by level. Apache RocketMQ writes the keys as
bare numbers (fastjson), which is not strict JSON; loading accepts both forms so a file
copied from an upstream broker is understood.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JsonConfigManager

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

    def __init__(self, config_dir: str) -> None:
        super().__init__(config_dir)
        self.offset_table: dict[int, int] = {}
        self._offsets_lock = threading.Lock()

    def load(self) -> bool:
        for candidate in (self.path, self.path + ".bak"):
            _rewrite_bare_keys(candidate)
        return super().load()

    def encode(self) -> dict[str, Any]:
        with self._offsets_lock:
            return {"offsetTable": {str(level): offset for level, offset in sorted(self.offset_table.items())}}

    def parse(self, obj: Any) -> dict[int, int]:
        if not isinstance(obj, dict):
            raise ValueError("delayOffset.json must hold a JSON object")
        table = obj.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise ValueError("delayOffset.json: offsetTable must be an object")
        return {int(level): int(offset) for level, offset in table.items()}

    def apply(self, parsed: dict[int, int]) -> None:
        with self._offsets_lock:
            self.offset_table = dict(parsed)

    def get(self, level: int) -> int:
        with self._offsets_lock:
            return self.offset_table.get(level, 0)

    def update(self, level: int, offset: int) -> None:
        with self._offsets_lock:
            self.offset_table[level] = offset
