"""DefaultElectPolicy (upstream's DefaultElectPolicy#elect and #tryElect)."""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.controller.elect_policy import elect, try_elect

INT_MAX = 2**31 - 1


@dataclass
class Live:
    broker_id: int
    epoch: int = 0
    max_offset: int = 0
    election_priority: int = INT_MAX


def alive(*ids):
    return lambda bid: bid in ids


def infos(*items: Live):
    table = {i.broker_id: i for i in items}
    return table.get


def test_only_alive_candidates():
    assert try_elect({1, 2}, None, None, alive(), infos()) is None
    assert try_elect({1, 2}, None, None, alive(2), infos()) == 2


def test_alive_old_master_kept_unless_another_is_preferred():
    assert try_elect({1, 2}, 1, None, alive(1, 2), infos(Live(2, epoch=9))) == 1
    assert try_elect({1, 2}, 1, 1, alive(1, 2), infos()) == 1
    assert try_elect({1, 2}, 1, 2, alive(1, 2), infos()) == 2


def test_preferred_must_be_an_alive_candidate_no_fallback():
    assert try_elect({1, 2}, None, 3, alive(1, 2, 3), infos()) is None
    assert try_elect({1, 2}, None, 2, alive(1), infos()) is None


def test_order_epoch_then_offset_then_priority():
    table = infos(Live(1, epoch=2, max_offset=10), Live(2, epoch=3, max_offset=1), Live(3, epoch=3, max_offset=1))
    assert try_elect({1, 2, 3}, None, None, alive(1, 2, 3), table) == 2  # tie on 2/3 -> lowest id
    table = infos(Live(1, epoch=3, max_offset=10), Live(2, epoch=3, max_offset=20))
    assert try_elect({1, 2}, None, None, alive(1, 2), table) == 2
    table = infos(Live(1, epoch=3, max_offset=20, election_priority=5),
                  Live(2, epoch=3, max_offset=20, election_priority=1))
    assert try_elect({1, 2}, None, None, alive(1, 2), table) == 2


def test_offset_gap_beyond_int_range_is_compared_exactly():
    # upstream casts the long difference to int; 4 GiB + 1 would wrap to 1 there
    table = infos(Live(1, epoch=1, max_offset=2**32 + 1), Live(2, epoch=1, max_offset=0))
    assert try_elect({1, 2}, None, None, alive(1, 2), table) == 1
    table = infos(Live(1, epoch=1, max_offset=0), Live(2, epoch=1, max_offset=3 * 2**31))
    assert try_elect({1, 2}, None, None, alive(1, 2), table) == 2


def test_no_live_info_takes_any_alive_member():
    assert try_elect({3, 2}, None, None, alive(2, 3), infos()) == 2


def test_unclean_fallback_only_when_enabled():
    assert elect({1}, {1, 2, 3}, 1, None, alive(3), infos(), False) is None
    assert elect({1}, {1, 2, 3}, 1, None, alive(3), infos(), True) == 3
    assert elect({1, 2}, {1, 2, 3}, 1, None, alive(2, 3), infos(Live(3, epoch=9)), True) == 2
