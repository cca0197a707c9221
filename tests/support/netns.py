"""Network partitions for chaos tests: each isolated process in its own network namespace.

A bridge in the test's namespace carries a subnet; every namespace hangs off it by a veth pair,
so namespaces reach each other and the test's namespace (where the controllers, the NameServer
and the proxy run, listening on the bridge address) at layer 2, with no forwarding. Taking a
namespace's veth down is a partition: packets vanish, connections hang without a reset, and
the process keeps running with its timers, unlike SIGSTOP. Setting the link up again heals it.

Needs root and `ip` (iproute2, installed by the Makefile); ``netns_unavailable()`` says why not.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from dataclasses import dataclass

_counter = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=10)


def netns_unavailable() -> str | None:
    """None when namespaces can be made here, else the reason (then tests fall back to SIGSTOP)."""
    probe = f"omqprobe{os.getpid() % 100000}"
    try:
        made = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run ip: {exc}"
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Namespace:
    name: str
    ip: str
    host_veth: str

    @property
    def exec_prefix(self) -> list[str]:
        """argv prefix that runs a command inside the namespace (``ip`` execs it: same PID)."""
        return ["ip", "netns", "exec", self.name]


class Bridge:
    """A bridge with one /24 subnet; ``add_namespace`` hangs a new namespace off it."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 10000}{next(_counter) % 10}"
        self.tag = tag
        self.name = f"omqbr{tag}"
        # 10.231.x.0/24, x from the tag: tests running side by side on one machine differ.
        self.subnet = f"10.231.{int(tag) % 250}"
        self.ip = f"{self.subnet}.1"
        self.namespaces: list[Namespace] = []
        _ip("link", "add", self.name, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.ip}/24", "dev", self.name)
            _ip("link", "set", self.name, "up")
        except subprocess.CalledProcessError:
            self.close()
            raise

    def add_namespace(self) -> Namespace:
        index = len(self.namespaces)
        ns = Namespace(f"omq{self.tag}n{index}", f"{self.subnet}.{index + 2}", f"omq{self.tag}h{index}")
        peer = f"omq{self.tag}p{index}"
        _ip("netns", "add", ns.name)
        self.namespaces.append(ns)
        _ip("link", "add", ns.host_veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", ns.name)
        _ip("link", "set", ns.host_veth, "master", self.name)
        _ip("link", "set", ns.host_veth, "up")
        _ip("-n", ns.name, "link", "set", "lo", "up")
        _ip("-n", ns.name, "addr", "add", f"{ns.ip}/24", "dev", peer)
        _ip("-n", ns.name, "link", "set", peer, "up")
        return ns

    def partition(self, ns: Namespace) -> None:
        """Cut ``ns`` off from everyone: its link goes down, nothing is reset."""
        _ip("link", "set", ns.host_veth, "down")

    def heal(self, ns: Namespace) -> None:
        _ip("link", "set", ns.host_veth, "up")  # the bridge runs no STP: it forwards at once

    def close(self) -> None:
        """Remove the namespaces (processes still inside keep theirs until they exit) and the bridge."""
        for ns in self.namespaces:
            _ip("link", "del", ns.host_veth, check=False)
            _ip("netns", "del", ns.name, check=False)
        self.namespaces.clear()
        _ip("link", "del", self.name, check=False)
