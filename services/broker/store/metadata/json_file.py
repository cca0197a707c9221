"""Crash-safe JSON config files with a .bak of the previous version (ConfigManager / MixAll.string2File).

A write never leaves a half-written main file: the new text goes to a temp file that is fsync'd
and renamed over the main file, and the directory is fsync'd so the rename itself survives a
power cut. Before that the previous main file becomes <name>.bak, so a main file corrupted by
anything else (a disk error, a hand edit) still leaves the last good version to fall back to.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from orbitmq.common import fastjson
from orbitmq.common.atomic_file import BAK_SUFFIX, write_file_atomically

log = logging.getLogger(__name__)



def write_text_atomic(path: str, text: str) -> None:
    """Replace `path` with `text` atomically, keeping the previous content as `path`.bak."""
    write_file_atomically(path, text.encode("utf-8"), keep_backup=True)


def write_json_atomic(path: str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False))


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        raise ValueError("empty file")
    try:
        return json.loads(text)
    except ValueError:
        # RocketMQ's ConfigManager writes fastjson's pretty form, whose Map<Integer, Long> keys
        # are bare numbers (consumerOffset.json's ``{"t@g":{0:1}}``, delayOffset.json): not
        # standard JSON, so an Apache broker's config/ is read with the lenient parser.
        return fastjson.loads(text)


def load_json_with_backup(path: str, validate=None) -> tuple[Any, str | None]:
    """Load `path`, falling back to `path`.bak when the main file is missing, empty or corrupt.

    `validate(obj)` may raise ValueError/TypeError/KeyError to reject a structurally wrong file.
    Returns (obj, path it came from), or (None, None) when neither file is usable. A corrupt
    main file is deleted, as ConfigManager.load does, so that the next write does not make it
    the .bak and lose the last good version.
    """
    for candidate in (path, path + BAK_SUFFIX):
        if not os.path.exists(candidate):
            continue
        try:
            obj = _read_json(candidate)
            if validate is not None:
                validate(obj)
            return obj, candidate
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            log.error("config file %s is unusable (%s), trying its backup", candidate, e)
            if candidate == path:
                try:
                    os.unlink(path)
                except OSError:
                    log.exception("cannot remove corrupt config file %s", path)
    return None, None
