"""enableControllerInNamesrv=true: ``orbitmq namesrv`` also runs a controller on controllerListenPort."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode as Q
from orbitmq.remoting.codes import ResponseCode as RC
from orbitmq.remoting.protocol import RemotingCommand
from tests.support.net import free_port


def _args(tmp_path, namesrv_port: int, controller_port: int, raft_port: int) -> list[str]:
    return [f"listenPort={namesrv_port}", "enableControllerInNamesrv=true", "controllerDLegerGroup=g",
            f"controllerDLegerPeers=n0-127.0.0.1:{raft_port}", "controllerDLegerSelfId=n0",
            f"controllerListenPort={controller_port}", "controllerBindAddress=127.0.0.1",
            f"controllerStorePath={tmp_path / 'ctrl'}", f"kvConfigPath={tmp_path / 'kv.json'}"]


def test_print_config_lists_the_controller_keys(tmp_path):
    args = _args(tmp_path, 19876, 19878, 19877)
    out = subprocess.run([sys.executable, "-m", "orbitmq", "namesrv", "-p", *args], capture_output=True,
                         text=True, check=True).stdout
    assert "enableControllerInNamesrv=true" in out and "controllerListenPort=19878" in out
    assert "listenPort=19876" in out and "controllerDLegerSelfId=n0" in out


async def test_namesrv_serves_routes_and_a_controller(procs, tmp_path):
    namesrv_port, controller_port, raft_port = free_port(), free_port(), free_port()
    await procs.astart("namesrv", _args(tmp_path, namesrv_port, controller_port, raft_port),
                       ready_port=controller_port, ready_text="The Controller boot success")
    async with RemotingClient() as client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:
            r = await client.invoke(f"127.0.0.1:{controller_port}",
                                    RemotingCommand.request(Q.CONTROLLER_GET_METADATA_INFO))
            if r.ext_fields.get("isLeader") == "true":
                break
            assert loop.time() < deadline, r.ext_fields
            await asyncio.sleep(0.1)
        assert r.ext_fields["controllerLeaderAddress"] == f"127.0.0.1:{controller_port}"
        r = await client.invoke(f"127.0.0.1:{controller_port}", RemotingCommand.request(
            Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": "C", "brokerName": "b"}))
        assert r.code == RC.SUCCESS and r.ext_fields["nextBrokerId"] == "1"
        r = await client.invoke(f"127.0.0.1:{namesrv_port}", RemotingCommand.request(Q.GET_NAMESRV_CONFIG))
        assert r.code == RC.SUCCESS and b"enableControllerInNamesrv=true" in r.body
