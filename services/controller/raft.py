"""ControllerRaft: the replicated ReplicasInfoManager on a pysyncobj Raft group.

Each state change is one Raft entry: the event bytes of replicas_info (EventSerializer layout)
passed to a ``@replicated`` method, applied in log order on every node by pysyncobj's tick
thread. Persistence lives under ``controllerStorePath``: ``raft.journal`` (pysyncobj's journal,
with the current term and vote) and ``raft.snapshot`` (a full dump of the state, written when the
log reaches ``controllerLogCompactionMinEntries`` entries, ``controllerLogCompactionMinTimeSecs``
seconds, or the journal file grows past ``mappedFileSize``); a restart loads the snapshot and
replays only the journal after it.

**Leadership.** Like DLedger, a leader serves only once an entry of its own term is committed and
applied (so every earlier entry is applied too): on becoming leader this node commits a
*leader barrier* entry, and :meth:`is_leader_ready` is true only for that term. A leader that
stops hearing from a majority for :data:`LEADER_LEASE_SECONDS` steps down (pysyncobj's
leaderFallbackTimeout), so an isolated node answers CONTROLLER_NOT_LEADER.

**Remoting addresses.** ``controllerDLegerPeers`` gives each node's Raft transport address; the
Remoting address brokers dial is carried by the barrier entry: each leader commits
``(its node id, its Remoting address)`` as the first entry of its term, so every node (follower
or not) can answer GET_METADATA_INFO with the leader's ``controllerLeaderAddress``.

**Threads.** pysyncobj runs its own thread. The asyncio side never waits on it: a proposal's
callback resolves an asyncio future through ``loop.call_soon_threadsafe``, and readers take
:attr:`lock` (held by the tick thread while it applies) only for short, non-blocking sections.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, SyncObjException, replicated

from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.replicas_info import (
    Event,
    EventDecodeError,
    ReplicasInfoManager,
    decode_event,
    encode_event,
)

log = logging.getLogger("orbitmq.controller.raft")

JOURNAL_FILE = "raft.journal"
SNAPSHOT_FILE = "raft.snapshot"
# DLedger-like timing, with room for a loaded machine: followers call an election after 0.8-2 s
# without a leader, and a leader that heard from no majority for 4 s steps down.
LEADER_LEASE_SECONDS = 4.0
RAFT_MIN_TIMEOUT = 0.8
RAFT_MAX_TIMEOUT = 2.0
BIND_RETRIES = 3
APPEND_ENTRIES_PERIOD = 0.1
WRITE_TIMEOUT_SECONDS = 5.0  # DLedger's commit wait
_LEADER = 2  # pysyncobj _RAFT_STATE.LEADER


class RaftWriteError(Exception):
    """A proposal did not commit; ``not_leader`` when leadership was lost meanwhile."""

    def __init__(self, message: str, not_leader: bool) -> None:
        super().__init__(message)
        self.not_leader = not_leader


class ReplicatedState(SyncObjConsumer):
    """The replicated part: ReplicasInfoManager plus each leader's Remoting address."""

    def __init__(self) -> None:
        # set before SyncObjConsumer.__init__, so pysyncobj leaves them out of full dumps
        self.lock = threading.RLock()
        super().__init__()
        self.replicas = ReplicasInfoManager()
        self.controller_addresses: dict[str, str] = {}

    @replicated
    def apply_event(self, data: bytes) -> bool:
        """One committed event; the return value reaches the proposer's callback."""
        try:
            event = decode_event(data)
        except EventDecodeError as exc:
            log.error("skipping undecodable Raft entry: %s", exc)
            return False
        if event is None:
            return True
        with self.lock:
            return self.replicas.apply_event(event)

    @replicated
    def leader_barrier(self, node_id: str, remoting_address: str, term: int) -> int:
        with self.lock:
            self.controller_addresses[node_id] = remoting_address
        return term

    @replicated
    def read_barrier(self) -> None:
        """processReadEvent=true: a read waits for this entry, so it sees every earlier commit."""
        return None

    def _serialize(self) -> dict[str, Any]:
        with self.lock:
            return {"replicas": self.replicas.to_dict(), "controllerAddresses": dict(self.controller_addresses)}

    def _deserialize(self, data: dict[str, Any]) -> None:
        with self.lock:
            self.replicas = ReplicasInfoManager.from_dict(data.get("replicas") or {})
            self.controller_addresses = dict(data.get("controllerAddresses") or {})


class ControllerRaft:
    def __init__(self, config: ControllerConfig, remoting_address: str) -> None:
        self.config = config
        self.peers = config.peers()
        self.self_id = config.controller_d_leger_self_id
        self.self_raft_address = self.peers[self.self_id]
        self._id_by_address = {addr: node_id for node_id, addr in self.peers.items()}
        self.remoting_address = remoting_address
        self.state = ReplicatedState()
        self._syncobj: SyncObj | None = None
        self._ready_term = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_leader_ready: Callable[[int], Any] | None = None
        self.on_leader_lost: Callable[[], Any] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def store_dir(self) -> str:
        return self.config.store_path()

    @property
    def journal_path(self) -> str:
        return os.path.join(self.store_dir, JOURNAL_FILE)

    @property
    def snapshot_path(self) -> str:
        return os.path.join(self.store_dir, SNAPSHOT_FILE)

    async def start(self) -> None:
        """Open the journal and join the group; OSError if the Raft address cannot be bound.

        The SyncObj is created on the event-loop thread: pysyncobj's tick thread stops when the
        thread that created it ends, and the loop thread lives longest.
        """
        self._loop = asyncio.get_running_loop()
        os.makedirs(self.store_dir, exist_ok=True)
        # As DLedger: the Raft transport listens on this node's own entry of controllerDLegerPeers,
        # the address its peers dial. bindAddress is the Remoting server's alone (binding Raft
        # there too would leave the peers dialling an address nobody listens on).
        bind_host = self.self_raft_address.rsplit(":", 1)[0]
        conf = SyncObjConf(
            journalFile=self.journal_path, fullDumpFile=self.snapshot_path,
            logCompactionMinEntries=self.config.controller_log_compaction_min_entries,
            logCompactionMinTime=self.config.controller_log_compaction_min_time_secs,
            dynamicMembershipChange=False, useFork=False, commandsWaitLeader=False,
            leaderFallbackTimeout=LEADER_LEASE_SECONDS, raftMinTimeout=RAFT_MIN_TIMEOUT,
            raftMaxTimeout=RAFT_MAX_TIMEOUT, appendEntriesPeriod=APPEND_ENTRIES_PERIOD,
            connectionRetryTime=1.0, connectionTimeout=2.0, maxBindRetries=BIND_RETRIES, bindRetryTime=0.5,
            bindAddress=f"{bind_host}:{self.self_raft_address.rsplit(':', 1)[1]}",
            onStateChanged=self._on_state_changed)
        others = [addr for node_id, addr in self.peers.items() if node_id != self.self_id]
        so = SyncObj(self.self_raft_address, others, conf, consumers=[self.state])
        self._syncobj = so
        try:
            await asyncio.to_thread(so.waitBinded)
        except SyncObjException:
            self._syncobj = None
            so.destroy()
            raise OSError(f"cannot bind the Raft address {conf.bindAddress} of {self.self_id}") from None

    async def shutdown(self) -> None:
        so, self._syncobj = self._syncobj, None
        self._ready_term = -1
        if so is None:
            return
        # the tick thread finishes its current tick, closes the sockets and exits
        await asyncio.to_thread(so.destroy_synchronous)

    # -- leadership ----------------------------------------------------------------------------

    def _on_state_changed(self, old_state: int, new_state: int) -> None:
        """Tick thread: a new leader commits its barrier; anything else is not ready."""
        if new_state == _LEADER:
            self._propose_barrier()
        else:
            self._ready_term = -1
            if old_state == _LEADER:
                self._call_loop(self.on_leader_lost)

    def _propose_barrier(self) -> None:
        so = self._syncobj
        if so is None:
            return
        term = so._getTerm()

        def done(result: Any, error: int) -> None:
            current = self._syncobj
            if current is None or not current._isLeader() or current._getTerm() != term:
                return
            if error == FAIL_REASON.SUCCESS:
                self._ready_term = term
                log.info("controller %s is the leader of term %d", self.self_id, term)
                self._call_loop(self.on_leader_ready, term)
            else:
                self._propose_barrier()

        self.state.leader_barrier(self.self_id, self.remoting_address, term, callback=done)

    def _call_loop(self, fn: Callable[..., Any] | None, *args: Any) -> None:
        loop = self._loop
        if fn is None or loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # loop closing
            pass

    def is_leader_ready(self) -> bool:
        so = self._syncobj
        return so is not None and so._isLeader() and self._ready_term == so._getTerm()

    def is_leader(self) -> bool:
        so = self._syncobj
        return so is not None and so._isLeader()

    def leader_id(self) -> str | None:
        """The node id of the last known Raft leader (ours if we lead)."""
        so = self._syncobj
        if so is None:
            return None
        if so._isLeader():
            return self.self_id
        leader = so._getLeader()
        if leader is None:
            return None
        return self._id_by_address.get(getattr(leader, "address", str(leader)))

    def leader_remoting_address(self) -> str | None:
        node_id = self.leader_id()
        if node_id is None:
            return None
        if node_id == self.self_id:
            return self.remoting_address if self.is_leader_ready() else None
        with self.state.lock:
            return self.state.controller_addresses.get(node_id)

    def term(self) -> int:
        so = self._syncobj
        return -1 if so is None else so._getTerm()

    def peers_text(self) -> str:
        """DLedger's peers string: n0:host:port;n1:host:port;"""
        return "".join(f"{node_id}:{addr};" for node_id, addr in self.peers.items())

    # -- writes --------------------------------------------------------------------------------

    async def _submit(self, method: Callable[..., Any], *args: Any, timeout: float) -> Any:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[Any, int]] = loop.create_future()

        def settle(result: Any, error: int) -> None:
            if not future.done():
                future.set_result((result, error))

        def callback(result: Any, error: int) -> None:
            try:
                loop.call_soon_threadsafe(settle, result, error)
            except RuntimeError:
                pass

        method(*args, callback=callback)
        try:
            result, error = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RaftWriteError(f"Raft entry not committed within {timeout:.0f}s",
                                 not_leader=not self.is_leader_ready()) from None
        if error != FAIL_REASON.SUCCESS:
            raise RaftWriteError(f"Raft entry failed (pysyncobj reason {error})",
                                 not_leader=error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.LEADER_CHANGED,
                                                      FAIL_REASON.MISSING_LEADER, FAIL_REASON.DISCARDED)
                                 or not self.is_leader_ready())
        return result

    async def propose(self, event: Event, timeout: float = WRITE_TIMEOUT_SECONDS) -> bool:  # noqa: ASYNC109
        """Commit ``event``; True if it applied (its guard held). Raises RaftWriteError."""
        if self._syncobj is None or not self.is_leader_ready():
            raise RaftWriteError("not the leader", not_leader=True)
        return bool(await self._submit(self.state.apply_event, encode_event(event), timeout=timeout))

    async def read_barrier(self, timeout: float = WRITE_TIMEOUT_SECONDS) -> None:  # noqa: ASYNC109
        if self._syncobj is None or not self.is_leader_ready():
            raise RaftWriteError("not the leader", not_leader=True)
        await self._submit(self.state.read_barrier, timeout=timeout)

    def maybe_compact(self) -> bool:
        """Snapshot now if the journal outgrew mappedFileSize; True if one was requested."""
        so = self._syncobj
        try:
            size = os.path.getsize(self.journal_path)
        except OSError:
            return False
        if so is not None and size > self.config.mapped_file_size:
            so.forceLogCompaction()
            return True
        return False

    def force_compaction(self) -> None:
        if self._syncobj is not None:
            self._syncobj.forceLogCompaction()

    def status(self) -> dict[str, Any]:
        so = self._syncobj
        return {} if so is None else so.getStatus()
