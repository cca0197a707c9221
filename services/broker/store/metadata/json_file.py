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
import shutil
from typing import Any

log = logging.getLogger(__name__)

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_text_atomic(path: str, text: str) -> None:
    """Replace `path` with `text` atomically, keeping the previous content as `path`.bak."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + TMP_SUFFIX
    _write_synced(tmp, text.encode("utf-8"))
    if os.path.exists(path):
        bak_tmp = path + BAK_SUFFIX + TMP_SUFFIX
        try:
            os.unlink(bak_tmp)
        except FileNotFoundError:
            pass
        try:
            # A hard link is a zero-copy, already-durable snapshot of the old inode.
            os.link(path, bak_tmp)
        except OSError:
            shutil.copyfile(path, bak_tmp)
            with open(bak_tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(bak_tmp, path + BAK_SUFFIX)
    os.replace(tmp, path)
    fsync_directory(directory)


def write_json_atomic(path: str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False))


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not text.strip():
        raise ValueError("empty file")
    return json.loads(text)


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
