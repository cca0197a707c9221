"""mqadmin copyUser / copyAcl: ACL 2.0 users and ACLs copied from one broker to another (a new
broker set joining a cluster), created where missing and updated where present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import start_broker, start_namesrv
from tests.support.process import running

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    workdir = tmp_path_factory.mktemp("copy-auth")
    with running(workdir) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        (workdir / "a").mkdir()
        (workdir / "b").mkdir()
        _, source = start_broker(runner, workdir / "a", namesrv, name="broker-a")
        _, target = start_broker(runner, workdir / "b", namesrv, name="broker-b", brokerName="broker-b")
        yield namesrv, source, target


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run([sys.executable, "-m", "orbitmq", "admin", *args, "-n", namesrv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def ok(namesrv: str, *args: str) -> str:
    done = admin(namesrv, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_copy_users_and_acls_between_brokers(two_brokers: tuple[str, str, str]) -> None:
    namesrv, source, target = two_brokers
    ok(namesrv, "createUser", "-b", source, "-u", "alice", "-p", "alice-pw")
    ok(namesrv, "createUser", "-b", source, "-u", "bob", "-p", "bob-pw", "-t", "Super")
    ok(namesrv, "createUser", "-b", target, "-u", "bob", "-p", "old-pw")  # present on the target: updated
    ok(namesrv, "createAcl", "-b", source, "-s", "User:alice", "-r", "Topic:orders,Group:g*", "-a", "Pub,Sub",
       "-d", "Allow")

    text = ok(namesrv, "copyUser", "-f", source, "-t", target)
    assert f"copy user of alice from {source} to {target} success." in text
    users = {u["username"]: u for u in json.loads(ok(namesrv, "listUser", "-b", target, "--json"))}
    assert (users["alice"]["password"], users["bob"]["password"], users["bob"]["userType"]) == (
        "alice-pw", "bob-pw", "Super")

    assert "copy acl of User:alice" in ok(namesrv, "copyAcl", "-f", source, "-t", target, "-s", "User:alice")
    acl = json.loads(ok(namesrv, "getAcl", "-b", target, "-s", "User:alice", "--json"))
    resources = sorted(e["resource"] for p in acl["policies"] for e in p["entries"])
    assert resources == ["Group:g*", "Topic:orders"]

    # -u names only some users; a name the source does not have is skipped
    ok(namesrv, "createUser", "-b", source, "-u", "carol", "-p", "carol-pw")
    copied = json.loads(ok(namesrv, "copyUser", "-f", source, "-t", target, "-u", "carol,nobody", "--json"))
    assert copied["usernames"] == ["carol"]
    done = admin(namesrv, "copyUser", "-f", source)
    assert done.returncode == 2 and "-t/--toBroker" in done.stderr
