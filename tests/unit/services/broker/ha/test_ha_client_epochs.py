"""AutoSwitchHAClient's epoch entries from TRANSFER frames: a heartbeat (body size 0) names the
master's epoch too, as upstream's HAReadSocketService reads it (found against an Apache
controller: a slave caught up at the end of log of a master elected there had no entry of the
new epoch; tests/compat/test_controller_across_kinds.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from orbitmq.broker.ha.epoch_file import EpochEntry, EpochFileCache
from orbitmq.broker.ha.ha_client import AutoSwitchHAClient
from orbitmq.broker.ha.ha_connection import TRANSFER_HEADER, HAConnectionState


class _Writer:
    def write(self, data: bytes) -> None:
        return None

    async def drain(self) -> None:
        return None


def _client(tmp_path: Path, max_offset: int, entries: list[EpochEntry]) -> tuple[AutoSwitchHAClient, list]:
    cache = EpochFileCache(str(tmp_path / "epochFileCheckpoint"))
    cache.set_entries(entries)
    appended: list[tuple[int, int]] = []
    replication = SimpleNamespace(append_to_commit_log=lambda offset, body: appended.append((offset, len(body)))
                                  or True, set_confirm_offset=lambda offset: None)
    store = SimpleNamespace(get_max_phy_offset=lambda: max_offset + sum(n for _, n in appended),
                            replication=replication)
    service = SimpleNamespace(store=store, epoch_cache=cache, store_config=SimpleNamespace(
        ha_housekeeping_interval=1000, ha_transfer_batch_size=32768, ha_send_heartbeat_interval=1000))
    client = AutoSwitchHAClient(service, 2)  # type: ignore[arg-type]
    client._writer = _Writer()  # type: ignore[assignment]
    return client, appended


def _frames(*frames: tuple[int, int, int, int, bytes]) -> asyncio.StreamReader:
    """(offset, epoch, epochStartOffset, confirmOffset, body) TRANSFER frames, then EOF."""
    reader = asyncio.StreamReader()
    for offset, epoch, start, confirm, body in frames:
        reader.feed_data(TRANSFER_HEADER.pack(HAConnectionState.TRANSFER, len(body), offset, epoch, start, confirm)
                         + body)
    reader.feed_eof()
    return reader


async def _run(client: AutoSwitchHAClient, reader: asyncio.StreamReader) -> None:
    try:
        await client._transfer_loop(reader)
    except asyncio.IncompleteReadError:  # EOF after the frames
        pass


async def test_a_heartbeat_names_the_new_epoch(tmp_path: Path) -> None:
    """A slave at 500 under epoch 1 hears heartbeats of a master elected at 500 (epoch 2): the
    entry 2-500 is appended before any byte of epoch 2, once."""
    client, appended = _client(tmp_path, 500, [EpochEntry(1, 0)])
    await _run(client, _frames((500, 2, 500, 500, b""), (500, 2, 500, 500, b"")))
    assert [(e.epoch, e.start_offset) for e in client.epoch_cache.all_entries()] == [(1, 0), (2, 500)]
    assert appended == []


async def test_data_after_a_heartbeat_and_an_unknown_epoch(tmp_path: Path) -> None:
    """Data under the epoch a heartbeat named appends no second entry; a heartbeat without an
    epoch (-1, a master with an empty epoch file) appends none."""
    client, appended = _client(tmp_path, 0, [])
    await _run(client, _frames((0, -1, -1, 0, b""), (0, 3, 0, 0, b""), (0, 3, 0, 4, b"abcd")))
    assert [(e.epoch, e.start_offset) for e in client.epoch_cache.all_entries()] == [(3, 0)]
    assert appended == [(0, 4)]
