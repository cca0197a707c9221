"""ControllerRaft on a one-node pysyncobj group: commit, leader barrier, snapshot + journal restart."""

from __future__ import annotations

import asyncio
import os

import pytest

from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.raft import SNAPSHOT_FILE, ControllerRaft, RaftWriteError, ReplicatedState
from orbitmq.controller.replicas_info import ApplyBrokerIdEvent, ElectMasterEvent
from tests.support.net import free_port


def _config(tmp_path, **extra) -> ControllerConfig:
    port = free_port()
    return ControllerConfig(controller_d_leger_group="g", controller_d_leger_peers=f"n0-127.0.0.1:{port}",
                            controller_d_leger_self_id="n0", controller_store_path=str(tmp_path / "store"),
                            **extra)


async def _wait(predicate, timeout=10.0):  # noqa: ASYNC109
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def _ready_raft(config) -> ControllerRaft:
    raft = ControllerRaft(config, "127.0.0.1:19999")
    ready = asyncio.Event()
    raft.on_leader_ready = lambda term: ready.set()
    await raft.start()
    await asyncio.wait_for(ready.wait(), 10)
    return raft


async def test_barrier_makes_leader_ready_and_publishes_remoting_address(tmp_path):
    raft = await _ready_raft(_config(tmp_path))
    try:
        assert raft.is_leader_ready() and raft.leader_id() == "n0"
        assert raft.leader_remoting_address() == "127.0.0.1:19999"
        assert raft.state.controller_addresses == {"n0": "127.0.0.1:19999"}
        assert raft.peers_text() == f"n0:{raft.self_raft_address};"
    finally:
        await raft.shutdown()
    assert not raft.is_leader_ready()
    with pytest.raises(RaftWriteError) as err:
        await raft.propose(ElectMasterEvent(False, "b"))
    assert err.value.not_leader


async def test_state_survives_restart_from_snapshot_and_journal(tmp_path):
    config = _config(tmp_path, controller_log_compaction_min_entries=1000000)
    raft = await _ready_raft(config)
    try:
        assert await raft.propose(ApplyBrokerIdEvent("C", "b", "h:1", 1, "h:1;1"))
        assert await raft.propose(ElectMasterEvent(True, "b", 1, 0))
        # a stale guard is refused on apply, and the proposer learns it
        assert not await raft.propose(ElectMasterEvent(True, "b", 1, 0))
        raft.force_compaction()
        await _wait(lambda: os.path.exists(os.path.join(raft.store_dir, SNAPSHOT_FILE)))
        assert await raft.propose(ApplyBrokerIdEvent("C", "b", "h:2", 2, "h:2;1")), "entry after the snapshot"
        await raft.read_barrier()
        before = raft.state.replicas.to_dict()
    finally:
        await raft.shutdown()

    again = await _ready_raft(config)
    try:
        assert again.state.replicas.to_dict() == before
        _replica, info = again.state.replicas.get_set("b")
        assert info.master_broker_id == 1 and info.master_epoch == 1
        assert set(again.state.replicas.get_set("b")[0].broker_id_info) == {1, 2}
    finally:
        await again.shutdown()


def test_consumer_snapshot_round_trip():
    state = ReplicatedState()
    state.replicas.apply_event(ApplyBrokerIdEvent("C", "b", "h:1", 1, "h:1;1"))
    state.controller_addresses["n1"] = "10.0.0.1:9878"
    data = state._serialize()
    other = ReplicatedState()
    other._deserialize(data)
    assert other.replicas.to_dict() == state.replicas.to_dict()
    assert other.controller_addresses == {"n1": "10.0.0.1:9878"}


async def test_journal_past_mapped_file_size_is_compacted(tmp_path):
    raft = await _ready_raft(_config(tmp_path, controller_log_compaction_min_entries=1000000))
    try:
        assert await raft.propose(ApplyBrokerIdEvent("C", "b", "h:1", 1, "h:1;1"))
        assert not raft.maybe_compact()  # 1 GiB default: nothing to do
        raft.config.mapped_file_size = 1
        assert raft.maybe_compact()
        await _wait(lambda: os.path.exists(raft.snapshot_path))
    finally:
        await raft.shutdown()


async def test_raft_address_in_use_fails_start(tmp_path):
    import socket

    config = _config(tmp_path)
    host, port = config.peers()["n0"].split(":")
    with socket.socket() as sock:
        sock.bind((host, int(port)))
        sock.listen()
        raft = ControllerRaft(config, "127.0.0.1:1")
        with pytest.raises(OSError, match="cannot bind the Raft address"):
            await raft.start()
