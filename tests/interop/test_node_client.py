"""A second language: the official RocketMQ 5 Node.js client sends, receives and acks through the proxy.

The client is installed by `make setup` (npm ci in tests/interop/node, pinned by its lockfile).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.interop.harness import Cluster, unique

NODE_DIR = Path(__file__).parent / "node"


def test_node_client_send_receive_ack(cluster: Cluster) -> None:
    node = shutil.which("node")
    assert node, "node is required (make setup installs the Node.js client)"
    assert (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir(), "run `make setup` (npm ci)"
    topic = cluster.create_topic(unique("NodeT"), queues=2)
    group = cluster.create_group(unique("NodeG"))
    run = subprocess.run([node, "send_receive.js", cluster.proxy, topic, group, "5"], cwd=NODE_DIR,
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(result["sent"]) == 5
    assert sorted(r["id"] for r in result["received"]) == sorted(result["sent"])
    assert result["acked"] == 5
    for r in result["received"]:
        i = r["body"].rsplit(" ", 1)[1]
        assert r["body"] == f"node message {i}"
        assert r["tag"] == "node"
        assert r["keys"] == [f"nk{i}"]
        assert r["props"] == {"i": i}
