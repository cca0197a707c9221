"""GroupTransferService: SYNC_MASTER waits resolved by acks, or timed out."""

import asyncio

from orbitmq.broker.ha.group_transfer import NO_LIMIT, GroupTransferService, acked_by


def test_acked_by_counts_the_needed_copies():
    assert acked_by([100, 300, 200], 1) == 300
    assert acked_by([100, 300, 200], 2) == 200
    assert acked_by([100, 300, 200], 3) == 100
    assert acked_by([100], 2) == -1  # too few replicas
    assert acked_by([], 0) == NO_LIMIT  # nothing to wait for


async def test_waiters_resolve_on_notify_and_time_out():
    acks: list[int] = []
    service = GroupTransferService(lambda need: acked_by(acks, need - 1))
    assert await service.wait(0, 2, 10) is False  # no replica at all: times out
    first = asyncio.create_task(service.wait(100, 2, 10_000))
    second = asyncio.create_task(service.wait(200, 2, 10_000))
    await asyncio.sleep(0)
    assert service.pending() == 2
    acks.append(150)
    service.notify()
    assert await first is True
    assert not second.done()
    acks[0] = 250
    service.notify()
    assert await second is True
    assert service.pending() == 0
    assert await service.wait(250, 2, 10) is True  # already acked: no wait
