"""HARuntimeInfo: what GET_BROKER_HA_STATUS (907, `mqadmin haStatus`) reports about replication.

The body keeps RocketMQ's field names (``master``, ``masterCommitLogMaxOffset``,
``inSyncSlaveNums``, ``haConnectionInfo`` [``addr``, ``slaveAckOffset``, ``diff``, ``inSync``,
``transferredByteInSecond``, ``transferFromWhere``], ``haClientRuntimeInfo`` [``masterAddr``,
``transferredByteInSecond``, ``maxOffset``, ``lastReadTimestamp``, ``lastWriteTimestamp``,
``masterFlushOffset``, ``activated``]), for both the AutoSwitch and the classic HA service.

A slave counts as in sync when it is in the SyncStateSet (controller mode) or, in classic mode,
when it is less than ``CLASSIC_IN_SYNC_MAX_GAP`` behind (upstream's haMaxGapNotInSync default).
Transfer rates are bytes per second between two haStatus calls of the same connection (upstream
keeps a per-second flow monitor; a rate measured between the reader's own samples says the same
without a timer on the hot path); the first call of a connection reports 0.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

CLASSIC_IN_SYNC_MAX_GAP = 256 * 1024 * 1024


class TransferRateSampler:
    """Bytes per second of a counter between two samples, per object (weakly held)."""

    def __init__(self) -> None:
        self._last: weakref.WeakKeyDictionary[Any, tuple[int, float]] = weakref.WeakKeyDictionary()

    def rate(self, owner: Any, total_bytes: int) -> int:
        now = time.monotonic()
        previous = self._last.get(owner)
        self._last[owner] = (total_bytes, now)
        if previous is None or now <= previous[1]:
            return 0
        return max(0, int((total_bytes - previous[0]) / (now - previous[1])))


def ha_runtime_info(broker: Any, sampler: TransferRateSampler) -> dict[str, Any]:
    """The HARuntimeInfo of ``broker`` (a BrokerController) as RocketMQ's JSON object."""
    store = broker.message_store
    service = broker.ha_service
    master_max = int(store.get_max_phy_offset())
    auto_switch = hasattr(service, "get_sync_state_set")
    if auto_switch:
        is_master = bool(service.is_master)
        sync_state_set = service.get_sync_state_set()
    else:
        is_master = store.config.broker_role != "SLAVE"
        sync_state_set = set()
    connections = []
    in_sync_slaves = 0
    if is_master and service is not None:
        for conn in service.connection_objects():
            ack = int(conn.slave_ack_offset)
            diff = master_max - ack if ack >= 0 else master_max
            if auto_switch:
                in_sync = getattr(conn, "slave_id", None) in sync_state_set
            else:
                in_sync = ack >= 0 and diff < CLASSIC_IN_SYNC_MAX_GAP
            in_sync_slaves += in_sync
            connections.append({
                "addr": conn.client_address, "slaveAckOffset": ack, "diff": diff, "inSync": in_sync,
                "transferredByteInSecond": sampler.rate(conn, int(conn.transferred_bytes)),
                "transferFromWhere": int(conn.next_transfer_from_where),
            })
    client_info: dict[str, Any] = {"masterAddr": None, "transferredByteInSecond": 0, "maxOffset": master_max,
                                   "lastReadTimestamp": 0, "lastWriteTimestamp": 0, "masterFlushOffset": 0,
                                   "activated": False}
    client = service.ha_client if service is not None and not is_master else None
    if client is not None:
        address = getattr(client, "master_ha_address", None) or getattr(client, "master_address", None)
        client_info.update({
            "masterAddr": address,
            "transferredByteInSecond": sampler.rate(client, int(client.transferred_bytes)),
            "lastReadTimestamp": int(getattr(client, "last_read_time_ms", 0)),
            "lastWriteTimestamp": int(client.last_write_time_ms),
            # The master's confirm offset as this slave last learned it (AutoSwitch transfer header);
            # the classic protocol carries none.
            "masterFlushOffset": int(store.replication.get_confirm_offset()) if auto_switch else 0,
            "activated": bool(address),
        })
    if client_info["masterAddr"] is None:
        del client_info["masterAddr"]  # fastjson leaves null fields out
    return {"master": is_master, "masterCommitLogMaxOffset": master_max, "inSyncSlaveNums": in_sync_slaves,
            "haConnectionInfo": connections, "haClientRuntimeInfo": client_info}
