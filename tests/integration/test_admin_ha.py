"""`orbitmq admin getBrokerEpoch / haStatus / clusterList` against a controller-mode broker set."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import sys
import time
from pathlib import Path

from orbitmq.admin.cli import main as admin_main
from orbitmq.bench.proxy_client import ProxyClient
from tests.support import ProcessRunner
from tests.support.ha_cluster import BROKER_NAME, CLUSTER, HACluster


def _admin(namesrv: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin_main([args[0], "-n", namesrv, *args[1:]])
    return code, out.getvalue(), err.getvalue()


async def test_epochs_roles_and_ha_status_of_each_replica(procs: ProcessRunner, tmp_path: Path) -> None:
    cluster = HACluster(procs, tmp_path / "ha")
    try:
        await cluster.start()
        master = await cluster.wait_master()
        everyone = {r.addr for r in cluster.replicas}
        await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=40)
        ns = cluster.namesrv_addr
        # Slaves record an epoch once data of it reaches them: send one message first.
        await cluster.create_topic("AdminHaTopic")
        await cluster.wait_topic_routed("AdminHaTopic")
        async with ProxyClient(cluster.endpoint) as client:
            assert (await client.send("AdminHaTopic", "one")).message_id

        code, out, err = await asyncio.to_thread(_admin, ns, "getBrokerEpoch", "-b", BROKER_NAME, "--json")
        assert code == 0, err
        caches = {c["brokerAddr"]: c for c in json.loads(out)}
        assert set(caches) == everyone
        master_epochs = [(e["epoch"], e["startOffset"]) for e in caches[master]["epochList"]]
        assert master_epochs and caches[master]["brokerId"] == 0
        code, text, err = await asyncio.to_thread(_admin, ns, "getBrokerEpoch", "-c", CLUSTER)
        assert code == 0, err
        assert f"#brokerAddr\t{master}" in text and f"#Epoch: EpochEntry{{epoch={master_epochs[-1][0]}," in text

        deadline = time.monotonic() + 20
        while True:
            code, out, err = await asyncio.to_thread(_admin, ns, "clusterList", "--json")
            assert code == 0, err
            rows = {r["brokerAddr"]: r for r in json.loads(out)}
            assert rows[master]["role"] == "MASTER" and rows[master]["brokerId"] == 0
            assert {a for a, r in rows.items() if r["role"] == "SLAVE"} == everyone - {master}
            epochs = [(r["brokerId"], r["role"], r["epoch"]) for r in rows.values()]
            if all(r["epoch"] == master_epochs[-1][0] for r in rows.values()):
                break
            assert time.monotonic() < deadline, f"replicas' epochs never matched the master's: {epochs}"
            await asyncio.sleep(0.5)
        code, text, err = await asyncio.to_thread(_admin, ns, "clusterList")
        assert code == 0 and text.splitlines()[0].split()[-2:] == ["#Role", "#Epoch"]

        code, out, err = await asyncio.to_thread(_admin, ns, "haStatus", "-b", master, "--json")
        assert code == 0, err
        (status,) = json.loads(out)
        assert status["master"] is True and status["inSyncSlaveNums"] == 2
        assert len(status["haConnectionInfo"]) == 2
        assert all(c["inSync"] and c["slaveAckOffset"] > 0 for c in status["haConnectionInfo"])
        slave = sorted(everyone - {master})[0]
        code, out, err = await asyncio.to_thread(_admin, ns, "haStatus", "-b", slave, "--json")
        assert code == 0, err
        (status,) = json.loads(out)
        assert status["master"] is False and status["haConnectionInfo"] == []
        assert status["haClientRuntimeInfo"]["activated"] is True and status["haClientRuntimeInfo"]["masterAddr"]
        code, text, err = await asyncio.to_thread(_admin, ns, "haStatus", "-c", CLUSTER)
        assert code == 0 and master in text, err

        # -i repeats the report until interrupted (upstream's interval option).
        for command, target in (("getBrokerEpoch", BROKER_NAME), ("haStatus", master)):
            repeating = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orbitmq", "admin", command, "-n", ns, "-b", target, "-i", "1",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            heading = "#brokerAddr" if command == "getBrokerEpoch" else "#MasterAddr"
            wanted = 2 * (3 if command == "getBrokerEpoch" else 1)  # two reports
            output = ""
            try:
                # Read until the second report, however long the CLI takes to start on a busy machine.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(60):
                        while output.count(heading) < wanted:
                            line = await repeating.stdout.readline()
                            if not line:
                                break
                            output += line.decode()
            finally:
                repeating.kill()
                output += (await repeating.communicate())[0].decode()
            assert output.count(heading) >= wanted, output
        code, _out, err = await asyncio.to_thread(_admin, ns, "haStatus", "-b", master, "-i", "soon")
        assert code == 1 and "-i expects a number of seconds" in err

        code, _out, err = await asyncio.to_thread(_admin, ns, "getBrokerEpoch", "-b", "no-such-broker")
        assert code == 1 and "no-such-broker is not found" in err
        code, _out, err = await asyncio.to_thread(_admin, ns, "getBrokerEpoch")
        assert code == 1 and "either -b brokerName or -c clusterName" in err
    finally:
        await cluster.close()
