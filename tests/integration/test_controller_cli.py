"""``orbitmq controller`` start-up: -c/-p, refused configurations, the boot line."""

from __future__ import annotations

import subprocess
import sys

from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode as Q
from orbitmq.remoting.protocol import RemotingCommand
from tests.support.net import free_port


def run(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orbitmq", "controller", *args], capture_output=True, text=True,
                          timeout=30, cwd=cwd)


def test_print_config_from_file_and_overrides(tmp_path):
    conf = tmp_path / "controller.conf"
    conf.write_text("controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9877\ncontrollerDLegerSelfId=n0\n"
                    "enableElectUncleanMaster=true\n")
    result = run("-c", str(conf), "-p", "listenPort=19999")
    assert result.returncode == 0, result.stderr
    assert "enableElectUncleanMaster=true" in result.stdout and "listenPort=19999" in result.stdout
    assert "controllerType=DLedger" in result.stdout and f"configStorePath={conf}" in result.stdout


def test_jraft_and_missing_peers_are_refused():
    result = run("controllerType=jRaft", "controllerDLegerGroup=g", "controllerDLegerPeers=n0-127.0.0.1:9877",
                 "controllerDLegerSelfId=n0")
    assert result.returncode == 2 and "jRaft is not supported" in result.stderr
    result = run("controllerDLegerGroup=g")
    assert result.returncode == 2 and "controllerDLegerPeers is required" in result.stderr


async def test_single_node_boots_and_leads(procs, tmp_path):
    port = free_port()
    proc = await procs.astart("controller", [
        "controllerDLegerGroup=g", f"controllerDLegerPeers=n0-127.0.0.1:{free_port()}", "controllerDLegerSelfId=n0",
        f"listenPort={port}", f"controllerStorePath={tmp_path / 'store'}"],
        ready_port=port, ready_text="The Controller boot success")
    async with RemotingClient() as client:
        r = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(Q.CONTROLLER_GET_METADATA_INFO))
        assert r.ext_fields["group"] == "g"
    assert proc.stop() == 0
    assert "The Controller shutdown OK" in proc.log_text()
