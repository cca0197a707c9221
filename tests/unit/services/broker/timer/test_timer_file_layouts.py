"""Byte layouts of timerwheel, timerlog and timercheck, big-endian as upstream's TimerWheel, TimerLog and
TimerCheckpoint write them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from orbitmq.broker.timer.checkpoint import TimerCheckpoint
from orbitmq.broker.timer.timer_log import BLANK_MAGIC_CODE, UNIT_SIZE, TimerLog, decode_unit, encode_unit
from orbitmq.broker.timer.wheel import SLOT_SIZE, WHEEL_LENGTH, TimerWheel


def test_wheel_file_and_slot_layout(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    wheel = TimerWheel(str(path), 1000)
    assert WHEEL_LENGTH == 38_707_200 == 604_800 * 2 * 32
    t = 1_795_733_057_000
    wheel.put_slot(t, 104, 520, 3, 0)
    wheel.close()
    data = path.read_bytes()
    assert len(data) == WHEEL_LENGTH
    index = (t // 1000) % (604_800 * 2)
    assert struct.unpack_from(">qqqii", data, index * SLOT_SIZE) == (t // 1000, 104, 520, 3, 0)

    wheel = TimerWheel(str(path), 1000)
    slot = wheel.get_slot(t)
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (t, 104, 520, 3)
    # The same index 14 days later holds another time: it reads as empty.
    later = wheel.get_slot(t + 2 * 604_800 * 1000)
    assert later.empty and (later.first_pos, later.last_pos) == (-1, -1)
    wheel.close()


def test_wheel_of_another_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "timerwheel"
    path.write_bytes(b"\0" * 1024)
    with pytest.raises(RuntimeError, match="timer wheel length"):
        TimerWheel(str(path), 1000)


def test_timer_log_unit_layout() -> None:
    unit = encode_unit(-1, 3, 1_000_000, 25_000, 4096, 321, -12345)
    assert len(unit) == UNIT_SIZE == 52
    assert struct.unpack(">iqiqiqiiq", unit) == (52, -1, 3, 1_000_000, 25_000, 4096, 321, -12345, 0)
    decoded = decode_unit(unit, 0)
    assert decoded is not None and decoded.delayed_time_ms == 1_025_000
    assert decode_unit(b"\0" * 52, 0) is None
    assert decode_unit(encode_unit(-1, 16, 0, 0, 0, 1, 0), 0) is None  # invalid magic


def test_timer_log_blank_and_roll(tmp_path: Path) -> None:
    file_size = 52 * 3 + 20  # room for three units, then 20 bytes: the fourth needs 52 + 16
    log = TimerLog(str(tmp_path / "timerlog"), file_size)
    positions = [log.append(encode_unit(-1, 1, 0, 1000, i * 100, 100, 0)) for i in range(4)]
    assert positions == [0, 52, 104, file_size]
    first = (tmp_path / "timerlog" / f"{0:020d}").read_bytes()
    assert struct.unpack_from(">iqI", first, 156) == (20, 0, BLANK_MAGIC_CODE)
    assert BLANK_MAGIC_CODE == (0xBBCCDDEE ^ (1880681586 + 8))
    assert (tmp_path / "timerlog" / f"{file_size:020d}").exists()
    units, end = log.scan(0)
    assert [u.offset_py for u in units] == [0, 100, 200, 300]
    assert end == file_size + 52
    assert log.read_unit(52).offset_py == 100
    log.shutdown()


def test_timer_checkpoint_layout(tmp_path: Path) -> None:
    path = tmp_path / "config" / "timercheck"
    cp = TimerCheckpoint(str(path))
    assert not cp.existed
    cp.update(last_read_time_ms=111, last_timer_log_flush_pos=222, last_timer_queue_offset=333,
              master_timer_queue_offset=444)
    cp.close()
    data = path.read_bytes()
    assert len(data) == 4096
    values = struct.unpack_from(">qqqqqqq", data, 0)
    assert values[:5] == (111, 222, 333, 444, 0)
    assert values[5] > 0 and values[6] == 1  # dataVersion timestamp, counter
    again = TimerCheckpoint(str(path))
    assert again.existed and again.data.last_timer_queue_offset == 333
    assert again.snapshot() == data[:56]
    again.close()
