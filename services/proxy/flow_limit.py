"""Per-family limits on gRPC calls in flight, with upstream's thread pool keys.

Upstream's GrpcMessagingApplication runs each RPC family on its own executor
(grpcRouteThreadPoolNums / grpcRouteThreadQueueCapacity, and the same for Producer, Consumer,
ClientManager and Transaction); a call finding its pool's queue full is answered at once with
TOO_MANY_REQUESTS "flow limit" (GrpcTaskRejectedExecutionHandler). The proxy's event loop has no
pools: the same keys bound the calls of a family in flight, pool size plus queue capacity, and
past it a call gets upstream's answer without running. Upstream's pool threads hand their call to
an asynchronous activity and move on, so this bound is stricter than upstream's in one way: a
call waiting on a broker still counts. Long polls (ReceiveMessage, PullMessage) are left out:
they wait for messages, not for work, and have their own bound (grpcMaxLongPollingRequests).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class Family(IntEnum):
    """The executor a call runs on upstream (GrpcMessagingApplication#addExecutor's first argument)."""

    ROUTE = 0  # QueryRoute, QueryAssignment
    PRODUCER = 1  # SendMessage, ForwardMessageToDeadLetterQueue, RecallMessage
    CONSUMER = 2  # AckMessage, ChangeInvisibleDuration, UpdateOffset, GetOffset, QueryOffset
    CLIENT_MANAGER = 3  # Heartbeat, NotifyClientTermination, SyncLiteSubscription
    TRANSACTION = 4  # EndTransaction


_KEYS = {Family.ROUTE: "route", Family.PRODUCER: "producer", Family.CONSUMER: "consumer",
         Family.CLIENT_MANAGER: "client_manager", Family.TRANSACTION: "transaction"}

FLOW_LIMIT_MESSAGE = "flow limit"


def family_limits(config: Any) -> list[int]:
    """Calls in flight each family allows: grpc<Family>ThreadPoolNums + grpc<Family>ThreadQueueCapacity."""
    limits = [0] * len(Family)
    for family, key in _KEYS.items():
        nums = int(getattr(config, f"grpc_{key}_thread_pool_nums"))
        capacity = int(getattr(config, f"grpc_{key}_thread_queue_capacity"))
        if nums < 1 or capacity < 0:
            raise ValueError(f"grpc {key} thread pool: nums must be >= 1 and queue capacity >= 0, "
                             f"got {nums} and {capacity}")
        limits[family] = nums + capacity
    return limits
