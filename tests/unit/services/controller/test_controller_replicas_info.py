"""ReplicasInfoManager: every check's codes, every event's effect, epoch rules, snapshots."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from orbitmq.common import fastjson
from orbitmq.controller.replicas_info import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    EventDecodeError,
    ReplicasInfoManager,
    UpdateBrokerAddressEvent,
    decode_event,
    encode_event,
    parse_sync_state_set_body,
)
from orbitmq.remoting.codes import ResponseCode as RC

C, B = "DefaultCluster", "broker-a"


@dataclass
class Live:
    broker_id: int
    epoch: int
    max_offset: int
    election_priority: int = 2**31 - 1


def alive_of(*ids: int):
    return lambda cluster, name, bid: bid in ids


def no_live_info(cluster, name, bid):
    return None


def commit(manager: ReplicasInfoManager, result) -> None:
    """What the leader does: apply the event of an accepted check (as Raft would, on every node)."""
    assert result.event is not None, result
    # through the wire encoding, as a Raft log entry carries it
    assert manager.apply_event(decode_event(encode_event(result.event)))


def registered(*ids: int) -> ReplicasInfoManager:
    m = ReplicasInfoManager()
    for bid in ids:
        commit(m, m.check_apply_broker_id(C, B, bid, f"127.0.0.1:{10910 + bid};1000{bid}"))
    return m


def elected(master: int, *ids: int) -> ReplicasInfoManager:
    m = registered(*ids)
    commit(m, m.check_elect_master(B, master, False, alive_of(*ids), no_live_info, False))
    return m


# ---- broker ids (1012 / 1013) -------------------------------------------------------------------

def test_next_broker_id_is_one_for_an_unknown_set_then_counts_up():
    m = ReplicasInfoManager()
    assert m.check_get_next_broker_id(C, B).header == {"clusterName": C, "brokerName": B, "nextBrokerId": "1"}
    commit(m, m.check_apply_broker_id(C, B, 1, "a:1;1"))
    assert m.check_get_next_broker_id(C, B).header["nextBrokerId"] == "2"
    commit(m, m.check_apply_broker_id(C, B, 2, "a:2;1"))
    assert m.check_get_next_broker_id(C, B).header["nextBrokerId"] == "3"


def test_apply_broker_id_first_of_a_set_must_be_one():
    m = ReplicasInfoManager()
    result = m.check_apply_broker_id(C, B, 2, "a:1;1")
    assert result.code == RC.CONTROLLER_BROKER_ID_INVALID and result.event is None
    ok = m.check_apply_broker_id(C, B, 1, "10.0.0.1:10911;1700000000000")
    assert ok.code == RC.SUCCESS and ok.header == {"clusterName": C, "brokerName": B}
    assert isinstance(ok.event, ApplyBrokerIdEvent) and ok.event.broker_address == "10.0.0.1:10911"
    commit(m, ok)
    replica, info = m.get_set(B)
    assert replica.broker_id_info == {1: ("10.0.0.1:10911", "10.0.0.1:10911;1700000000000")}
    assert info.master_broker_id is None and info.master_epoch == 0 and info.sync_state_set == set()


def test_apply_broker_id_taken_id_refused_but_same_check_code_is_idempotent():
    m = registered(1)
    same = m.check_apply_broker_id(C, B, 1, "127.0.0.1:10911;10001")
    assert same.code == RC.SUCCESS and same.event is None
    other = m.check_apply_broker_id(C, B, 1, "127.0.0.1:9999;5")
    assert other.code == RC.CONTROLLER_BROKER_ID_INVALID
    assert m.check_apply_broker_id(C, B, 0, "x:1;1").code == RC.CONTROLLER_BROKER_ID_INVALID
    assert m.check_apply_broker_id(C, B, 7, "x:1;1").code == RC.SUCCESS


# ---- register (1003) ----------------------------------------------------------------------------

def test_register_needs_set_and_id():
    m = registered(1)
    assert m.check_register_broker(C, "nope", 1, "a:1", alive_of(1)).code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert m.check_register_broker(C, B, 5, "a:1", alive_of(1)).code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_register_returns_master_only_when_alive_and_updates_address():
    m = elected(1, 1, 2)
    result = m.check_register_broker(C, B, 2, "127.0.0.1:10912", alive_of(1, 2))
    assert result.code == RC.SUCCESS and result.event is None
    assert result.header == {"clusterName": C, "brokerName": B, "masterBrokerId": "1",
                             "masterAddress": "127.0.0.1:10911", "masterEpoch": "1", "syncStateSetEpoch": "1"}
    assert parse_sync_state_set_body(result.body) == ({1}, 1)
    dead_master = m.check_register_broker(C, B, 2, "127.0.0.1:10912", alive_of(2))
    assert dead_master.header == {"clusterName": C, "brokerName": B}
    moved = m.check_register_broker(C, B, 2, "10.9.9.9:10911", alive_of(1, 2))
    assert moved.event == UpdateBrokerAddressEvent(C, B, "10.9.9.9:10911", 2)
    commit(m, moved)
    assert m.get_set(B)[0].broker_id_info[2][0] == "10.9.9.9:10911"
    assert m.get_set(B)[0].broker_id_info[2][1] == "127.0.0.1:10912;10002"  # check code kept


# ---- elect (1002) -------------------------------------------------------------------------------

def test_elect_unknown_set_or_unregistered_id():
    m = ReplicasInfoManager()
    assert m.check_elect_master(B, 1, False, alive_of(1), no_live_info, False).code == \
        RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    m = registered(1)
    assert m.check_elect_master(B, 3, False, alive_of(1), no_live_info, False).code == \
        RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_first_election_takes_the_requester_without_liveness_check():
    m = registered(1, 2)
    result = m.check_elect_master(B, 2, False, alive_of(), no_live_info, False)
    assert result.code == RC.SUCCESS
    assert result.header == {"masterBrokerId": "2", "masterEpoch": "1", "syncStateSetEpoch": "1",
                             "masterAddress": "127.0.0.1:10912"}
    body = fastjson.loads(result.body)
    assert body == {"brokerMemberGroup": {"cluster": C, "brokerName": B,
                                          "brokerAddrs": {"1": "127.0.0.1:10911", "2": "127.0.0.1:10912"}},
                    "syncStateSet": [2]}
    commit(m, result)
    info = m.get_set(B)[1]
    assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == \
        (2, 1, {2}, 1)


def test_live_old_master_is_kept_with_master_still_exist():
    m = elected(1, 1, 2)
    result = m.check_elect_master(B, 2, False, alive_of(1, 2), no_live_info, False)
    assert result.code == RC.CONTROLLER_MASTER_STILL_EXIST and result.event is None
    assert result.header["masterBrokerId"] == "1" and result.header["masterAddress"] == "127.0.0.1:10911"
    assert result.header["masterEpoch"] == "1"
    assert fastjson.loads(result.body) == {"syncStateSet": [1]}


def _with_sss(master: int, sss: set[int], *ids: int) -> ReplicasInfoManager:
    m = elected(master, *ids)
    commit(m, m.check_alter_sync_state_set(B, master, 1, sss, 1, alive_of(*ids)))
    return m


def test_dead_master_replaced_from_sync_state_set_and_epochs_bump():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, -1, False, alive_of(2, 3), no_live_info, False)
    assert result.code == RC.SUCCESS and result.header["masterBrokerId"] == "2"
    assert result.header["masterEpoch"] == "2" and result.header["syncStateSetEpoch"] == "3"
    commit(m, result)
    info = m.get_set(B)[1]
    assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == \
        (2, 2, {2}, 3)


def test_controller_triggered_no_candidate_clears_master_and_bumps_epoch_anyway():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, None, False, alive_of(3), no_live_info, False)
    assert result.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert result.event == ElectMasterEvent(False, B, None, 1)
    commit(m, result)
    info = m.get_set(B)[1]
    assert info.master_broker_id is None and info.master_epoch == 2
    assert info.sync_state_set == {1, 2} and info.sync_state_set_epoch == 2  # SSS kept


def test_broker_triggered_no_candidate_is_elect_failed_without_event():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, 3, False, alive_of(3), no_live_info, False)
    assert result.code == RC.CONTROLLER_ELECT_MASTER_FAILED and result.event is None


def test_unclean_election_falls_back_to_all_replicas():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, -1, False, alive_of(3), no_live_info, True)
    assert result.code == RC.SUCCESS and result.header["masterBrokerId"] == "3"


def test_designated_election_picks_preferred_or_fails():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, 2, True, alive_of(1, 2, 3), no_live_info, False)
    assert result.code == RC.SUCCESS and result.header["masterBrokerId"] == "2"
    refused = m.check_elect_master(B, 3, True, alive_of(1, 2, 3), no_live_info, False)
    assert refused.code == RC.CONTROLLER_ELECT_MASTER_FAILED  # 3 is not in the SyncStateSet


def test_election_prefers_newest_epoch_then_largest_offset():
    m = _with_sss(1, {1, 2, 3}, 1, 2, 3)
    infos = {2: Live(2, epoch=1, max_offset=5 * 2**31), 3: Live(3, epoch=1, max_offset=100)}
    result = m.check_elect_master(B, -1, False, alive_of(2, 3), lambda c, n, bid: infos.get(bid), False)
    assert result.header["masterBrokerId"] == "2"


def test_stale_elect_event_is_refused_at_apply():
    m = elected(1, 1, 2)
    stale = ElectMasterEvent(True, B, 2, expect_master_epoch=0)
    assert m.apply_event(stale) is False
    assert m.get_set(B)[1].master_broker_id == 1 and m.get_set(B)[1].master_epoch == 1


# ---- alter SyncStateSet (1001), checks in upstream's order -------------------------------------------

@pytest.mark.parametrize("kwargs, alive, code", [
    ({"broker_name": "nope"}, (1, 2), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ({"new_set": {1}}, (1, 2), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
    ({"master_broker_id": 2}, (1, 2), RC.CONTROLLER_INVALID_MASTER),
    ({"master_epoch": 7}, (1, 2), RC.CONTROLLER_FENCED_MASTER_EPOCH),
    ({"new_set_epoch": 0}, (1, 2), RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
    ({"new_set": {1, 9}}, (1, 2), RC.CONTROLLER_INVALID_REPLICAS),
    ({}, (1,), RC.CONTROLLER_BROKER_NOT_ALIVE),
    ({"new_set": {2}}, (1, 2), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
])
def test_alter_sync_state_set_refusals(kwargs, alive, code):
    m = elected(1, 1, 2)
    args = {"broker_name": B, "master_broker_id": 1, "master_epoch": 1, "new_set": {1, 2}, "new_set_epoch": 1}
    args.update(kwargs)
    result = m.check_alter_sync_state_set(**args, is_alive=alive_of(*alive))
    assert result.code == code and result.event is None


def test_alter_sync_state_set_success():
    m = elected(1, 1, 2)
    result = m.check_alter_sync_state_set(B, 1, 1, {1, 2}, 1, alive_of(1, 2))
    assert result.code == RC.SUCCESS and result.header == {"newSyncStateSetEpoch": "2"}
    assert parse_sync_state_set_body(result.body) == ({1, 2}, 2)
    commit(m, result)
    assert m.get_set(B)[1].sync_state_set == {1, 2} and m.get_set(B)[1].sync_state_set_epoch == 2
    # the same event again (a deposed leader's duplicate) finds the epoch moved on
    assert m.apply_event(result.event) is False


# ---- replica info (1004), sync state data (1006) --------------------------------------------------

def test_get_replica_info():
    assert ReplicasInfoManager().get_replica_info(B).code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST
    m = elected(1, 1, 2)
    result = m.get_replica_info(B)
    assert result.header == {"masterEpoch": "1", "masterBrokerId": "1", "masterAddress": "127.0.0.1:10911"}
    assert parse_sync_state_set_body(result.body) == ({1}, 1)


def test_get_sync_state_data_layout():
    m = elected(1, 1, 2)
    result = m.get_sync_state_data([B, "unknown"], alive_of(1))
    table = json.loads(result.body)["replicasInfoTable"]
    assert list(table) == [B]
    assert table[B] == {
        "masterBrokerId": 1, "masterAddress": "127.0.0.1:10911", "masterEpoch": 1, "syncStateSetEpoch": 1,
        "inSyncReplicas": [{"brokerName": B, "brokerId": 1, "brokerAddress": "127.0.0.1:10911", "alive": True}],
        "notInSyncReplicas": [{"brokerName": B, "brokerId": 2, "brokerAddress": "127.0.0.1:10912",
                               "alive": False}]}


# ---- clean (1011) -------------------------------------------------------------------------------

def test_clean_refusals():
    m = elected(1, 1, 2)
    invalid = RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert m.check_clean_broker_data(C, "nope", None, False, alive_of()).code == invalid
    assert m.check_clean_broker_data(C, B, None, False, alive_of(1)).code == invalid  # live master
    assert m.check_clean_broker_data(C, B, "2", False, alive_of(2)).code == invalid  # live target
    assert m.check_clean_broker_data(C, B, "1;x", False, alive_of()).code == invalid  # bad list


def test_clean_some_ids_then_whole_set():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_clean_broker_data(C, B, "2;3", False, alive_of(1))
    assert result.event == CleanBrokerDataEvent(B, frozenset({2, 3}))
    commit(m, result)
    replica, info = m.get_set(B)
    assert set(replica.broker_id_info) == {1} and info.sync_state_set == {1}
    living = m.check_clean_broker_data(C, B, None, True, alive_of(1))
    commit(m, living)
    assert not m.is_contains_broker(B) and m.broker_names() == []


def test_cleaning_every_id_drops_the_set():
    m = registered(1)
    commit(m, m.check_clean_broker_data(C, B, "1", False, alive_of()))
    assert not m.is_contains_broker(B)


# ---- events and snapshots -----------------------------------------------------------------------

def test_event_encoding_is_type_prefixed_json():
    event = AlterSyncStateSetEvent(B, frozenset({2, 1}), 3)
    data = encode_event(event)
    assert data[:2] == b"\x00\x01"
    assert json.loads(data[2:])["newSyncStateSet"] == [1, 2]
    for e in (event, ApplyBrokerIdEvent(C, B, "a:1", 1, "a:1;2"), ElectMasterEvent(False, B),
              CleanBrokerDataEvent(B), CleanBrokerDataEvent(B, frozenset({1})), UpdateBrokerAddressEvent(C, B, "x", 1)):
        assert decode_event(encode_event(e)) == e
    assert decode_event(b"") is None and decode_event(b"\x00\x04{}") is None
    with pytest.raises(EventDecodeError):
        decode_event(b"\x00\x09{}")
    with pytest.raises(EventDecodeError):
        decode_event(b"\x00\x01{\"brokerName\":1}")


def test_snapshot_round_trip():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    commit(m, m.check_elect_master(B, -1, False, alive_of(2), no_live_info, False))
    commit(m, m.check_apply_broker_id(C, "broker-b", 1, "h:1;1"))
    snapshot = json.loads(json.dumps(m.to_dict()))
    restored = ReplicasInfoManager.from_dict(snapshot)
    assert restored.to_dict() == m.to_dict()
    assert restored.get_set(B)[1].master_broker_id == 2
    assert restored.get_set(B)[0].broker_id_info[3] == ("127.0.0.1:10913", "127.0.0.1:10913;10003")
    assert restored.check_get_next_broker_id(C, B).header["nextBrokerId"] == "4"


# ---- upstream's exact clean rules and remarks (ReplicasInfoManager.cleanBrokerData) -------------------

def test_clean_without_ids_is_refused_while_the_set_has_a_master_even_a_dead_one():
    m = elected(1, 1, 2)
    result = m.check_clean_broker_data(C, B, None, False, alive_of())
    assert result.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA and result.event is None
    assert result.remark == f"Broker {B} is still alive, clean up failure"


def test_clean_without_ids_and_without_master_drops_the_set_even_with_live_members():
    m = registered(1, 2)
    result = m.check_clean_broker_data(C, B, None, False, alive_of(1, 2))
    assert result.code == RC.SUCCESS and result.event == CleanBrokerDataEvent(B, None)
    commit(m, result)
    assert not m.is_contains_broker(B)


def test_clean_remarks_and_check_order():
    m = elected(1, 1, 2)
    live = m.check_clean_broker_data(C, B, "2", False, alive_of(2))
    assert live.remark == f"Broker [{B},  2] is still alive, clean up failure"
    bad = m.check_clean_broker_data(C, B, "1;x", False, alive_of())
    assert bad.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert bad.remark.startswith("Please set the option <brokerControllerIdsToClean> according to the format")
    # liveness is checked before existence: an unknown set with a living id is "still alive"
    assert m.check_clean_broker_data(C, "nope", "2", False, alive_of(2)).remark == \
        "Broker [nope,  2] is still alive, clean up failure"
    unknown = m.check_clean_broker_data(C, "nope", "1;2;3", True, alive_of())
    assert unknown.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert unknown.remark == "Broker nope is not existed,clean broker data failure."


def test_upstream_remarks_of_unknown_sets():
    m = ReplicasInfoManager()
    assert m.get_replica_info(B).remark == "Broker metadata is not existed"
    assert m.check_alter_sync_state_set(B, 1, 1, {1}, 0, alive_of(1)).remark == "Broker metadata is not existed"
    assert m.check_elect_master(B, 1, False, alive_of(1), no_live_info, False).remark == \
        "Broker hasn't been registered"
    reg = m.check_register_broker(C, B, 1, "a:1", alive_of(1))
    assert reg.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert reg.remark == f"Broker-set: {B} hasn't been registered in controller"


def test_controller_triggered_elect_failure_answers_an_empty_header():
    m = _with_sss(1, {1, 2}, 1, 2, 3)
    result = m.check_elect_master(B, -1, False, alive_of(3), no_live_info, False)
    assert result.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE and result.header == {}
    assert result.remark == "Old master has down and failed to elect a new broker master"


def test_sync_state_data_without_master_leaves_master_fields_out():
    m = registered(1, 2)
    table = json.loads(m.get_sync_state_data([B], alive_of(1)).body)["replicasInfoTable"]
    assert "masterBrokerId" not in table[B] and "masterAddress" not in table[B]  # fastjson drops nulls
    assert table[B]["masterEpoch"] == 0 and len(table[B]["notInSyncReplicas"]) == 2
