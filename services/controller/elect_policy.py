"""DefaultElectPolicy: which replica of a broker set becomes master (DefaultElectPolicy#elect/#tryElect).

Candidates are the SyncStateSet, then (only with enableElectUncleanMaster) every registered
replica. Among them only live ones count; a live old master is kept unless another id is
designated; a designated id wins only if it is a live candidate; otherwise the replica with the
newest epoch, then the largest CommitLog offset (compared as Python ints: upstream's int cast of
a long difference mis-orders gaps of 2 GiB and more), then the lowest electionPriority.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol


class LiveInfo(Protocol):
    broker_id: int
    epoch: int
    max_offset: int
    election_priority: int


AliveFn = Callable[[int], bool]
LiveInfoFn = Callable[[int], LiveInfo | None]


def _sort_key(info: LiveInfo) -> tuple[int, int, int, int]:
    # epoch desc, maxOffset desc, electionPriority asc; the id last so ties are deterministic
    return (-info.epoch, -info.max_offset, info.election_priority, info.broker_id)


def try_elect(brokers: Iterable[int], old_master: int | None, preferred: int | None,
              is_alive: AliveFn, live_info: LiveInfoFn) -> int | None:
    """One round of the policy over ``brokers``; None if nobody qualifies."""
    alive = sorted(b for b in set(brokers) if is_alive(b))
    if not alive:
        return None
    if old_master is not None and old_master in alive and (preferred is None or preferred == old_master):
        return old_master
    if preferred is not None:
        return preferred if preferred in alive else None
    infos = [info for info in (live_info(b) for b in alive) if info is not None]
    if infos:
        return min(infos, key=_sort_key).broker_id
    return alive[0]


def elect(sync_state_brokers: Iterable[int], all_replica_brokers: Iterable[int], old_master: int | None,
          preferred: int | None, is_alive: AliveFn, live_info: LiveInfoFn,
          enable_elect_unclean_master: bool) -> int | None:
    """The new master id (may equal ``old_master``), or None when no replica qualifies."""
    chosen = try_elect(sync_state_brokers, old_master, preferred, is_alive, live_info)
    if chosen is None and enable_elect_unclean_master:
        chosen = try_elect(all_replica_brokers, old_master, preferred, is_alive, live_info)
    return chosen
