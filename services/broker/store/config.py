"""MessageStoreConfig: the broker.conf keys that shape the storage engine, with RocketMQ's defaults.

Attribute names are snake_case; the broker.conf keys are RocketMQ's camelCase names
(``storePathRootDir``, ``checkCRCOnRecover`` …) via ConfigBase, so an existing broker.conf works.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from orbitmq.common.config import ConfigBase

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"

OS_PAGE_SIZE = 4096
CQ_STORE_UNIT_SIZE = 20


FLUSH_DISK_TYPES = (ASYNC_FLUSH, SYNC_FLUSH)
BROKER_ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)


@dataclass
class MessageStoreConfig(ConfigBase):
    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    # Empty means <storePathRootDir>/commitlog, as RocketMQ derives it.
    store_path_commit_log: str = ""
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = False
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    max_message_size: int = 1024 * 1024 * 4
    check_crc_on_recover: bool = field(default=True, metadata={"key": "checkCRCOnRecover"})
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    message_index_enable: bool = True
    # -- ConsumeQueue extension (consume_queue_ext.py; upstream MessageStoreConfig keys) --
    # Each ConsumeQueue entry points to a unit in <storePathRootDir>/consumequeue_ext holding the
    # tag code, store time and SQL92 filter bit map. Off by default: the queues are then exactly
    # RocketMQ's, and an Apache broker can read the store. bitMapLengthConsumeQueueExt (bits) is
    # set by the broker to its bloom filter's m (ConsumerFilterManager's constructor).
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    # Retention (CleanCommitLogService / CleanConsumeQueueService).
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    clean_resource_interval: int = 10_000
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_maped_file_interval_forcibly: int = 120_000
    redelete_hanged_file_interval: int = 120_000
    disk_space_warning_level_ratio: float = 0.90
    disk_space_clean_forcibly_ratio: float = 0.85
    clean_file_forcibly_enable: bool = True
    broker_role: str = ASYNC_MASTER
    # No osPageCacheBusyTimeOutMills: the CommitLog is appended to on the event loop, so no check
    # can run while an append holds it, and the key would be accepted and ignored
    # (docs/compatibility.md, "Flow control").
    # A slave corrects a pull's offset (PULL_OFFSET_MOVED) itself instead of sending the
    # consumer to the group's brokerId.
    offset_check_in_slave: bool = False
    # Background pre-creation of the next CommitLog segment (AllocateMappedFileService).
    allocate_mapped_file_enable: bool = True
    # Fill pre-created CommitLog segments with zeros (synced) before use, as RocketMQ's
    # warmMapedFileEnable. Off by default like upstream: it doubles disk writes and makes every
    # fresh 1 GiB segment cost 1 GiB of I/O; on, each append skips a slow page fault on the
    # event loop (~1 µs per 1 KiB record, see mapped_file.py). `orbitmq bench store` turns it on.
    warm_maped_file_enable: bool = False
    # With warmMapedFileEnable: sync the zeros every this many pages (RocketMQ's default, 16 MiB).
    flush_least_pages_when_warm_maped_file: int = 1024 // 4 * 16
    # ASYNC_FLUSH: a thread keeps the CommitLog pages just ahead of the write position faulted
    # in (allocate.WarmAheadService), so appends on the event loop skip first-touch page faults.
    # The window follows the write rate up to warmCommitLogAheadMaxSize bytes; each flush may
    # write up to one window of zeros more. Needs Linux 5.14+ (MADV_POPULATE_WRITE).
    warm_commit_log_ahead_enable: bool = True
    warm_commit_log_ahead_max_size: int = 4 * 1024 * 1024
    warm_commit_log_ahead_interval: int = 20
    # -- transient store pool (transient_store_pool.py; upstream MessageStoreConfig keys) --
    # Appends go into a pooled, mlock'd write buffer per CommitLog segment; CommitRealTimeService
    # copies them into the file every commitIntervalCommitLog ms and readers (dispatch, pulls, HA)
    # only ever see what was copied. Honoured as DefaultMessageStore#isTransientStorePoolEnable
    # decides in RocketMQ 5 (see MessageStoreConfig.transient_store_pool_effective).
    # A send is acknowledged once in the buffer, as upstream: kill -9 of the broker loses the
    # acknowledged records not yet committed (about one commit interval's); committed ones are in
    # the page cache, which outlives the process. A machine crash loses what was not flushed,
    # with or without the pool.
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    # -- delay levels (used by orbitmq.broker.schedule; upstream MessageStoreConfig keys) --
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flush_delay_offset_interval: int = 10_000
    # -- timer messages (services/broker/timer; upstream MessageStoreConfig keys and defaults) --
    # Off: messages with TIMER_* properties are refused (WHEEL_TIMER_NOT_ENABLE), no wheel files.
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3 * 24 * 3600
    # Delays at least this many slots ahead are parked and rolled (2 <= n <= 604740, else 604740).
    timer_roll_window_slot: int = 2 * 24 * 3600
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_flush_interval_ms: int = 1000
    # Flow control per slot: off by default (Integer.MAX_VALUE).
    timer_congest_num_each_slot: int = 2**31 - 1
    timer_enable_retry_until_success: bool = False
    timer_stop_enqueue: bool = False
    timer_stop_dequeue: bool = False
    # Milliseconds after start before due timer messages are delivered (-1: at once).
    disappear_time_after_start: int = -1
    # -- Light Message Queue (RIP-28; upstream MessageStoreConfig keys and defaults) --
    # enableLmq: a message carrying INNER_MULTI_DISPATCH gets one INNER_MULTI_QUEUE_OFFSET per
    # %LMQ% queue it names, at put. enableMultiDispatch: dispatch writes each named queue's
    # ConsumeQueue entry. maxLmqConsumeQueueNum: with both on, a multi-dispatch send is refused
    # (LMQ_CONSUME_QUEUE_NUM_EXCEEDED) once more LMQ queues exist (docs/compatibility.md).
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20000
    # -- replication (services/broker/ha, docs/controller-ha.md; MessageStoreConfig's ha* keys) --
    # Classic slave: the master's HA address (ip:port); empty = the one the NameServer returns.
    ha_master_address: str = ""
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    # Flow control of what a master sends each slave (services/broker/ha/flow_monitor.py).
    ha_flow_control_enable: bool = False
    max_ha_transfer_byte_in_second: int = 100 * 1024 * 1024
    # OrbitMQ key: the wait before a slave dials its master again (upstream hard-codes 5 s).
    ha_connect_retry_interval: int = 5000
    # SYNC_MASTER: how long a send waits for its replicas before FLUSH_SLAVE_TIMEOUT.
    slave_timeout: int = 3000
    # Replicas of the broker set, this one included: above 1 with enableSlaveActingMaster a broker
    # starts isolated and BrokerPreOnlineService brings it online (services/broker/failover).
    total_replicas: int = 1
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    all_ack_in_sync_state_set: bool = False
    ha_max_time_slave_not_catchup: int = 15_000
    # Empty means <storePathRootDir>/epochFileCheckpoint.
    store_path_epoch_file: str = ""
    # Dispatch (and so readers) may pass the confirm offset.
    read_un_committed: bool = False
    # An empty slave starts from the master's last CommitLog file instead of its first.
    sync_from_last_file: bool = False
    # A slave that never joins the SyncStateSet.
    async_learner: bool = False

    def __post_init__(self) -> None:
        if self.flush_disk_type not in FLUSH_DISK_TYPES:
            raise ValueError(f"config key flushDiskType: expected one of {FLUSH_DISK_TYPES}, got {self.flush_disk_type!r}")
        if self.broker_role not in BROKER_ROLES:
            raise ValueError(f"config key brokerRole: expected one of {BROKER_ROLES}, got {self.broker_role!r}")
        if self.mapped_file_size_consume_queue % CQ_STORE_UNIT_SIZE:
            raise ValueError("config key mappedFileSizeConsumeQueue: must be a multiple of 20 (one ConsumeQueue entry)")
        if self.timer_precision_ms <= 0:
            raise ValueError(f"config key timerPrecisionMs: must be positive, got {self.timer_precision_ms}")
        if self.ha_flow_control_enable and self.max_ha_transfer_byte_in_second <= 0:
            raise ValueError("config key maxHaTransferByteInSecond: must be positive with haFlowControlEnable=true, "
                             f"got {self.max_ha_transfer_byte_in_second}")
        if self.timer_max_delay_sec <= 0:
            raise ValueError(f"config key timerMaxDelaySec: must be positive, got {self.timer_max_delay_sec}")
        if self.transient_store_pool_enable and self.transient_store_pool_size <= 0:
            raise ValueError("config key transientStorePoolSize: must be positive with transientStorePoolEnable=true, "
                             f"got {self.transient_store_pool_size}")
        self.store_path_root_dir = os.path.expanduser(self.store_path_root_dir)

    def transient_store_pool_effective(self, enable_controller_mode: bool = False) -> bool:
        """Whether the pool is used: DefaultMessageStore#isTransientStorePoolEnable in RocketMQ 5,
        i.e. transientStorePoolEnable, and not a SLAVE unless in controller mode (where the role
        can change at run time; a replica's appends then go straight to the file, see
        MappedFile.append). RocketMQ 5 no longer requires ASYNC_FLUSH (4.x's
        MessageStoreConfig#isTransientStorePoolEnable did): under SYNC_FLUSH a group commit
        waits for the commit service, as upstream's GroupCommitService#doCommit does."""
        return self.transient_store_pool_enable and (enable_controller_mode or self.broker_role != SLAVE)

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def consume_queue_ext_dir(self) -> str:
        """StorePathConfigHelper#getStorePathConsumeQueueExt."""
        return os.path.join(self.store_path_root_dir, "consumequeue_ext")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def epoch_file_path(self) -> str:
        return self.store_path_epoch_file or os.path.join(self.store_path_root_dir, "epochFileCheckpoint")

    @property
    def timer_wheel_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "timerwheel")

    @property
    def timer_log_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "timerlog")

    @property
    def timer_checkpoint_path(self) -> str:
        return os.path.join(self.config_dir, "timercheck")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")
