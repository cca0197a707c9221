"""Apache's mqadmin (rocketmq-tools 5.5.0) controller and HA commands against an OrbitMQ
controller-mode cluster (tests/support/ha_cluster.py: three controllers, a broker set of three
replicas): each prints the facts `orbitmq admin --json` prints, and electMaster moves the master
as `orbitmq admin` and the NameServer then see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path

from orbitmq.admin.cli import main as admin_main
from tests.interop.java.mqadmin.tools import mqadmin, orbit, sections, tabbed, table
from tests.support.ha_cluster import BROKER_NAME, CLUSTER, HACluster
from tests.support.process import running


def in_sync(text: str) -> set[str]:
    """getSyncStateSet's "InSyncReplica:	ReplicaIdentity{..., brokerAddress='a', ...}" addresses."""
    return {line.split("brokerAddress='")[1].split("'")[0] for line in text.splitlines()
            if line.startswith("InSyncReplica:")}


def orbit_failure(*args: str) -> str:
    """`orbitmq admin <args>`'s one-line failure."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin_main(list(args))
    assert code == 1, (out.getvalue(), err.getvalue())
    return err.getvalue()


async def test_controller_commands_print_what_orbitmq_admin_prints(tmp_path: Path) -> None:
    with running(tmp_path / "procs") as runner:
        cluster = HACluster(runner, tmp_path / "ha")
        try:
            await cluster.start()
            await cluster.create_topic("MqaHa")
            await cluster.wait_topic_routed("MqaHa")
            await check(cluster, tmp_path)
        finally:
            await cluster.close()


async def check(cluster: HACluster, tmp_path: Path) -> None:
    ns, controllers = cluster.namesrv_addr, cluster.controller_addr
    first = cluster.controllers[0].addr
    master = await cluster.master_addr()
    everyone = await cluster.wait_all_in_sync()
    slave = sorted(everyone - {master})[0]

    async def orbit_json(*args: str):
        return await asyncio.to_thread(orbit, ns, *args)

    runs = dict(zip(("meta", "sss", "sss -c", "config", "update", "epoch", "epoch -c", "ha", "clusterList"),
                    await asyncio.to_thread(mqadmin, tmp_path / "jvm", [
        ["getControllerMetaData", "-n", ns, "-a", first],
        ["getSyncStateSet", "-n", ns, "-a", first, "-b", BROKER_NAME],
        ["getSyncStateSet", "-n", ns, "-a", first, "-c", CLUSTER],
        ["getControllerConfig", "-n", ns, "-a", controllers],
        ["updateControllerConfig", "-n", ns, "-a", controllers, "-k", "electMasterMaxRetryCount", "-v", "4"],
        ["getBrokerEpoch", "-n", ns, "-b", BROKER_NAME],
        ["getBrokerEpoch", "-n", ns, "-c", CLUSTER],
        ["haStatus", "-n", ns, "-c", CLUSTER],
        ["clusterList", "-n", ns],
    ]), strict=True))
    outs = {name: run.ok() for name, run in runs.items()}

    # getControllerMetaData: group, leader and peers
    meta = tabbed(outs["meta"])[0]
    orbit_meta = await orbit_json("getControllerMetaData", "-a", first)
    assert (meta["ControllerGroup"], meta["ControllerLeaderId"], meta["ControllerLeaderAddress"]) == (
        orbit_meta["group"], orbit_meta["controllerLeaderId"], orbit_meta["controllerLeaderAddress"]), orbit_meta

    # getSyncStateSet (-b, -c): master, epochs and every replica in sync
    orbit_sss = await orbit_json("getSyncStateSet", "-a", first, "-b", BROKER_NAME)
    theirs = orbit_sss[BROKER_NAME]
    for name in ("sss", "sss -c"):
        head = tabbed(outs[name])[0]
        assert (head["brokerName"], head["MasterBrokerId"], head["MasterAddr"], head["MasterEpoch"],
                head["SyncStateSetEpoch"], head["SyncStateSetNums"]) == (
            BROKER_NAME, str(theirs["masterBrokerId"]), master, str(theirs["masterEpoch"]),
            str(theirs["syncStateSetEpoch"]), str(len(theirs["inSyncReplicas"]))), head
        assert in_sync(outs[name]) == {r["brokerAddress"] for r in theirs["inSyncReplicas"]} == everyone

    # getControllerConfig / updateControllerConfig: each controller's key = value list
    config = sections(outs["config"])
    assert set(config) == {c.addr for c in cluster.controllers}
    orbit_config = await orbit_json("getControllerConfig", "-a", controllers)
    assert config == {addr: {**values, "electMasterMaxRetryCount": "3"} for addr, values in orbit_config.items()}, \
        "getControllerConfig differs"
    assert all(values["electMasterMaxRetryCount"] == "4" for values in orbit_config.values())
    assert "update controller config success!" in outs["update"]

    # getBrokerEpoch (-b, -c): the replicas and the master's epochs
    orbit_epochs = {c["brokerAddr"]: c for c in await orbit_json("getBrokerEpoch", "-b", BROKER_NAME)}
    for name in ("epoch", "epoch -c"):
        blocks = {b["brokerAddr"]: b for b in tabbed(outs[name])}
        assert set(blocks) == set(orbit_epochs) == everyone
        assert {a: b["brokerId"] for a, b in blocks.items()} == {a: str(c["brokerId"]) for a, c in orbit_epochs.items()}
        # (the tool prints the last entry's endOffset as the cache's maxOffset)
        master_epochs = [f"EpochEntry{{epoch={e['epoch']}, startOffset={e['startOffset']}, endOffset="
                         for e in orbit_epochs[master]["epochList"]]
        assert master_epochs and all(f"#Epoch: {e}" in outs[name] for e in master_epochs), outs[name]

    # haStatus -c: the master's view of its slaves
    ha = tabbed(outs["ha"])
    orbit_ha = await orbit_json("haStatus", "-c", CLUSTER)
    orbit_master = next(h for h in orbit_ha if h.get("master"))
    assert [(h["MasterAddr"], h["SlaveNum"], h["InSyncSlaveNum"]) for h in ha if "MasterAddr" in h] == [
        (master, str(len(orbit_master["haConnectionInfo"])), str(orbit_master["inSyncSlaveNums"]))]

    # clusterList: the replicas by brokerId, the master as 0
    rows = {r[3]: r[2] for r in table(outs["clusterList"])}
    orbit_rows = {r["brokerAddr"]: str(r["brokerId"]) for r in await orbit_json("clusterList")}
    assert rows == orbit_rows and rows[master] == "0"

    # cleanBrokerMetadata of a live replica: refused the same way by both tools
    replica_id = next(line.split("brokerId=")[1].split(",")[0] for line in outs["sss"].splitlines()
                      if f"brokerAddress='{slave}'" in line)
    (refused,) = await asyncio.to_thread(mqadmin, tmp_path / "jvm", [
        ["cleanBrokerMetadata", "-n", ns, "-a", first, "-b", replica_id, "-bn", BROKER_NAME, "-c", CLUSTER]])
    reason = f"Broker [{BROKER_NAME},  {replica_id}] is still alive, clean up failure"
    assert "CODE: 2009" in refused.failure() and reason in refused.err
    orbit_reason = await asyncio.to_thread(orbit_failure, "cleanBrokerMetadata", "-n", ns, "-a", first, "-b",
                                           replica_id, "--brokerName", BROKER_NAME, "-c", CLUSTER)
    assert reason in orbit_reason and "[code 2009]" in orbit_reason

    # electMaster: the slave becomes master; orbitmq admin and the NameServer see it
    (elected,) = await asyncio.to_thread(mqadmin, tmp_path / "jvm", [
        ["electMaster", "-n", ns, "-a", first, "-b", replica_id, "-bn", BROKER_NAME, "-c", CLUSTER]])
    result = tabbed(elected.ok())[0]
    assert (result["ClusterName"], result["BrokerName"], result["BrokerMasterAddr"]) == (CLUSTER, BROKER_NAME, slave)
    assert await cluster.wait_master(not_addr=master) == slave
    after = (await orbit_json("getSyncStateSet", "-a", first, "-b", BROKER_NAME))[BROKER_NAME]
    assert (after["masterAddress"], str(after["masterEpoch"]), str(after["masterBrokerId"])) == (
        slave, result["MasterEpoch"], replica_id)
