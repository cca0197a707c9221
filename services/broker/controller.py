"""BrokerController: wires the store, metadata, Remoting server, client registry and long polling.

Embeddable: ``await BrokerController(broker_config, store_config).start()`` runs a whole
broker inside the caller's event loop (``orbitmq local`` runs several services in one process);
``shutdown()`` stops it cleanly, persisting offsets and unregistering from the NameServers.

Seams for other broker modules:
- ``register_processor(code, processor)`` adds a Remoting processor behind the
  malformed-request guard (CONSUMER_SEND_MSG_BACK, POP, transactions …);
- the store's ``add_put_message_hook`` runs inside every append (the delay-level redirect to
  SCHEDULE_TOPIC_XXXX uses it, so it also covers messages the broker stores itself);
- ``on_metadata_changed(topics=…, groups=…)`` makes the tables' journals durable and tells
  every NameServer about the topics created or changed (an increment registration, not the
  whole table); ``topics_changed()`` does the same and waits for it.

Processors and services reach the store, the metadata managers and the client registries as
attributes (``broker.message_store``, ``broker.consumer_offset_manager``, ``broker.stats``…), as
upstream's processors call ``brokerController.getMessageStore()``. The broker's own methods are
the ones that combine its parts: puts and gets that count stats and metrics, key lookups,
NameServer registration, role changes and runtime config.

Replication: in controller mode (``enableControllerMode``) a ReplicasManager owns the role and
the broker id (services/broker/ha/replicas_manager.py) over an AutoSwitchHAService; otherwise
``brokerRole`` decides, over a DefaultHAService. Either way a slave runs SlaveSynchronize, and
delay-level delivery and POP revive run on a master only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable
from typing import Any

from orbitmq.auth.config import AuthConfig
from orbitmq.broker.client.channel_info import now_ms
from orbitmq.broker.client.consumer_manager import ConsumerManager
from orbitmq.broker.client.producer_manager import ProducerManager
from orbitmq.broker.client.rebalance_lock import RebalanceLockManager
from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.ha.slave_synchronize import SlaveSynchronize
from orbitmq.broker.longpolling.pull_request_hold import PullRequestHoldService
from orbitmq.broker.metrics import BrokerMetricsManager
from orbitmq.broker.outer_api import BrokerOuterAPI, RegisterBrokerResult
from orbitmq.broker.pop.offset_recovery import raise_pop_offsets
from orbitmq.broker.processors import filtering
from orbitmq.broker.processors.registry import Processor, ProcessorRegistry
from orbitmq.broker.processors.send_queue import SendQueue
from orbitmq.broker.stats import BrokerStatsManager
from orbitmq.broker.store.config import SLAVE, SYNC_MASTER, MessageStoreConfig
from orbitmq.broker.store.metadata.consumer_offset_manager import ConsumerOffsetManager
from orbitmq.broker.store.metadata.lmq import (
    LmqConsumerOffsetManager,
    LmqSubscriptionGroupManager,
    LmqTopicConfigManager,
)
from orbitmq.broker.store.metadata.subscription_group_manager import SubscriptionGroupManager
from orbitmq.broker.store.metadata.topic_config_manager import TopicConfigManager
from orbitmq.broker.store.model import AppendMessageStatus, GetMessageStatus, MessageExtBrokerInner
from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.constants import PERM_READ, PERM_WRITE, is_readable, is_writeable
from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.message_codec import RecordError, decode_record, tags_hash_code
from orbitmq.common.metrics import metrics_enabled
from orbitmq.common.route import DataVersion
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer, server_limits
from orbitmq.remoting.tls import client_ssl_context

log = logging.getLogger(__name__)

# BrokerController#registerProcessor: the fast server (listenPort - 2, the "VIP channel" clients use
# with vipChannelEnabled, MixAll#brokerVIPChannel) serves every request but these; they fall to its
# default processor and are refused as not supported.
FAST_SERVER_EXCLUDED = frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE, RequestCode.PEEK_MESSAGE,
                                  RequestCode.POP_MESSAGE, RequestCode.NOTIFICATION, RequestCode.POLLING_INFO})

_APPEND_PUT_OK = AppendMessageStatus.PUT_OK
_TAGS = MessageConst.TAGS
_GET_FOUND = GetMessageStatus.FOUND

# A pull without maxMsgBytes is bounded by the store's own hot/cold transfer caps only.
MAX_PULL_BYTES = 2**31 - 1


@functools.lru_cache(maxsize=4096)
def _parse_born_host(born_host: str) -> tuple[str, int]:
    """"host:port" of the sending channel -> (host, port); cached because every message of a
    connection carries the same one (the tuple is immutable, so sharing it is safe)."""
    host, _, port = born_host.rpartition(":")
    try:
        return (host.strip("[]") or "127.0.0.1", int(port))
    except ValueError:
        return ("127.0.0.1", 0)


def sync_master_ack_warning(config: BrokerConfig, store_config: MessageStoreConfig) -> str | None:
    """Why a SYNC_MASTER with the default ``inSyncReplicas=1`` is no safer than an ASYNC_MASTER.

    ``inSyncReplicas`` counts the master, and CommitLog#handleHA answers at once when it is 1,
    as upstream 5.x does without saying so. A controller-mode master is a SYNC_MASTER too, whose
    allAckInSyncStateSet=true waits for the whole SyncStateSet instead.
    """
    if store_config.in_sync_replicas > 1:
        return None
    if config.enable_controller_mode:
        if store_config.all_ack_in_sync_state_set:
            return None
        return (f"enableControllerMode=true with inSyncReplicas={store_config.in_sync_replicas} and "
                "allAckInSyncStateSet=false: the master acknowledges a send before any slave has it; set "
                "allAckInSyncStateSet=true or inSyncReplicas>=2 (docs/controller-ha.md)")
    if store_config.broker_role != SYNC_MASTER:
        return None
    return (f"brokerRole=SYNC_MASTER with inSyncReplicas={store_config.in_sync_replicas} waits for no slave: a "
            "send is acknowledged once the master has it, as with ASYNC_MASTER; set inSyncReplicas>=2 "
            "(docs/controller-ha.md)")


class BrokerController:
    def __init__(self, config: BrokerConfig, store_config: MessageStoreConfig, *, listen_host: str = "0.0.0.0") -> None:
        config.resolve_defaults()
        self.config = config
        self.store_config = store_config
        self.listen_host = listen_host
        config_dir = store_config.config_dir
        # enableLmq: the LMQ managers (store/metadata/lmq.py), as BrokerController picks them.
        lmq = store_config.enable_lmq
        topic_manager = LmqTopicConfigManager if lmq else TopicConfigManager
        self.topic_config_manager = topic_manager(
            config_dir, broker_cluster_name=config.broker_cluster_name, broker_name=config.broker_name,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            cluster_topic_enable=config.cluster_topic_enable, broker_topic_enable=config.broker_topic_enable,
            trace_topic_enable=config.trace_topic_enable, msg_trace_topic_name=config.msg_trace_topic_name,
            revive_queue_num=config.revive_queue_num, timer_wheel_enable=store_config.timer_wheel_enable)
        self.subscription_group_manager = (LmqSubscriptionGroupManager if lmq else SubscriptionGroupManager)(
            config_dir, auto_create_subscription_group=config.auto_create_subscription_group)
        self.consumer_offset_manager = (LmqConsumerOffsetManager if lmq else ConsumerOffsetManager)(config_dir)
        self.message_store: Any = None
        self.consumer_manager = ConsumerManager(self._on_consumer_ids_changed, config.channel_expired_timeout)
        self.consumer_manager.subscription_expired_millis = config.subscription_expired_timeout
        # -- SQL92 consumer filters and their bloom filter (services/broker/filter) --
        from orbitmq.broker.filter import ConsumerFilterManager

        self.consumer_filter_manager = ConsumerFilterManager(
            config_dir, config.max_error_rate_of_bloom_filter, config.expect_consumer_num_use_filter,
            config.filter_data_clean_time_span)
        # ConsumerFilterManager's constructor: the ConsumeQueue extension's bit maps are m bits
        store_config.bit_map_length_consume_queue_ext = self.consumer_filter_manager.bloom_filter.m
        # DefaultConsumerIdsChangeListener's REGISTER / UNREGISTER events
        self.consumer_manager.on_register = self.consumer_filter_manager.register_group
        self.consumer_manager.on_unregister = self.consumer_filter_manager.unregister
        self.producer_manager = ProducerManager(config.channel_expired_timeout)
        self.rebalance_lock_manager = RebalanceLockManager(config.rebalance_lock_max_live_time)
        self.pull_request_hold_service = PullRequestHoldService(
            self._max_offset_or_zero, filtering.matches, config.long_polling_enable,
            config.short_polling_time_mills, config.pull_request_hold_check_interval_mills)
        self.send_queue = SendQueue(
            config.send_message_thread_pool_nums, config.send_thread_pool_queue_capacity,
            lambda: self.config.wait_time_mills_in_send_queue, config.broker_fast_failure_enable,
            worker_delay_ms=lambda: self.config.send_message_test_delay_mills)
        self.stats = BrokerStatsManager()
        # TopicQueueMappingManager's DataVersion: no static topics here, so it never moves on.
        self.mapping_data_version: dict[str, Any] = DataVersion().to_json_dict()
        # -- metrics (services/broker/metrics): None when metricsExporterType=DISABLE --
        self.metrics: BrokerMetricsManager | None = (
            BrokerMetricsManager(self) if metrics_enabled(config) else None)
        self.processors = ProcessorRegistry()
        # Parked pulls and POPs each hold a request slot for up to their poll time, and a proxy
        # multiplexes many clients over one connection: bound in-flight requests per connection
        # by the pull queue capacity (upstream's executor queue), not the Remoting default of 256.
        self.remoting_server = RemotingServer(listen_host, config.listen_port,
                                              max_concurrent_requests=config.pull_thread_pool_queue_capacity,
                                              **server_limits(config))
        # BrokerController#initializeRemotingServer's fast server on listenPort - 2: started by start()
        # once listenPort is known. The NameServer learns only listenPort; clients derive this one.
        self.fast_remoting_server: RemotingServer | None = None
        self._guard: Any = None
        self.outer_api = BrokerOuterAPI(config.register_broker_timeout_mills)
        # -- replication (services/broker/ha) --
        self.ha_service: Any = None
        self.epoch_cache: Any = None
        self.replicas_manager: Any = None
        self.slave_synchronize = SlaveSynchronize(self)
        # tls.enable: Remoting to NameServers and to the master over TLS (the controller's port is plaintext)
        self.outer_api.client.ssl_context = self.slave_synchronize.client.ssl_context = client_ssl_context(config)
        self._fenced = False
        self._special_services_on: bool | None = None
        # Classic slave: the master's HA address the NameServer last returned.
        self._master_ha_addr: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._register_now = asyncio.Event()
        self._scan_kick = asyncio.Event()
        self._persist_topics = False
        self._persist_groups = False
        # registerIncrementBrokerData: one task sends what piles up while a send is in flight.
        self._increment_task: asyncio.Task[None] | None = None
        self._increment_waiters: list[asyncio.Future[None]] = []
        self._increment_pending: dict[str, Any] = {}
        # Increments sent while a full registration (taken before them) was in flight: sent
        # again after it, so an older whole table never lands last.
        self._full_in_flight = 0
        self._resend_after_full: set[str] = set()
        self._started = False
        self._background: set[asyncio.Task[Any]] = set()
        self._register_default_processors()
        # -- ACL 2.0 (services/broker/auth): users/ACLs beside the other metadata, AUTH_* 3001-3010 --
        from orbitmq.auth.client import install_signing
        from orbitmq.broker.auth.processor import AuthAdminProcessor
        from orbitmq.broker.auth.store import AuthMetadataStore

        config.validate_auth()
        self.auth_store = AuthMetadataStore(config_dir)
        AuthAdminProcessor(self).register()
        for client in (self.outer_api.client, self.slave_synchronize.client):
            install_signing(client, config.inner_credentials())  # BrokerOuterAPI's inner credentials
        # -- delay levels (orbitmq.broker.schedule): put-path redirect + ScheduleMessageService --
        from orbitmq.broker.schedule.schedule_message_service import ScheduleMessageService
        self.schedule_message_service = ScheduleMessageService(self)
        # -- timer messages (orbitmq.broker.timer): put-time conversion + TimerMessageStore --
        from orbitmq.broker.timer.timer_message_store import TimerMessageStore
        self.timer_message_store = TimerMessageStore(self)
        # -- Slave Acting Master (orbitmq.broker.failover): min broker id, escaped writes, pre-online --
        from orbitmq.broker.failover import acting_master
        from orbitmq.broker.failover.escape_bridge import EscapeBridge
        from orbitmq.broker.failover.pre_online import BrokerPreOnlineService

        self.escape_bridge = EscapeBridge(self)
        self.escape_bridge.api.remoting.ssl_context = self.outer_api.client.ssl_context
        install_signing(self.escape_bridge.api.remoting, config.inner_credentials())
        self.acting_master = acting_master.ActingMasterService(self)
        acting_master.register(self, self.acting_master)
        self.outer_api.register_fields = self.acting_master.register_fields()
        self.pre_online_service: BrokerPreOnlineService | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        from orbitmq.broker.store.message_store import MessageStore

        self._check_replication_config()
        await self._start_metrics()
        if self.config.enable_controller_mode:
            # A bad or foreign identity file refuses the start now, not later in the background.
            await asyncio.to_thread(self._check_broker_identity)
        for manager in (self.topic_config_manager, self.subscription_group_manager, self.consumer_offset_manager,
                        self.consumer_filter_manager):
            if not await asyncio.to_thread(manager.load):
                raise RuntimeError(f"cannot load {manager.path}")
        await asyncio.to_thread(self._load_auth_metadata)
        for code, processor in self.processors.table.items():
            self.remoting_server.register(code, self._timed(code, processor))
        if self.config.auth_enabled:
            from orbitmq.auth.engine import RemotingAuthGuard, guard_processor

            auth_guard = RemotingAuthGuard(self.config, self.config.broker_cluster_name,
                                           self.auth_store.get_user, self.auth_store.get_acl)
            if self.metrics is not None:
                auth_guard.on_denied = self.metrics.on_auth_denied
            self._guard = lambda processor: guard_processor(auth_guard, processor)
            self.remoting_server.set_guard(self._guard)
        self.remoting_server.on_connect(self._on_client_connect)
        ephemeral = self.config.listen_port == 0
        if ephemeral:
            # An ephemeral port (tests, `orbitmq local`): bind first so that message ids and the
            # NameServer registration carry the port the OS picked. Nobody knows the port yet.
            await self.remoting_server.start()
            self.config.listen_port = self.remoting_server.port
            await self._start_fast_server()
        store_host = (self.config.broker_ip1, self.config.listen_port)
        self.message_store = MessageStore(self.store_config, store_host=store_host,
                                          enable_controller_mode=self.config.enable_controller_mode)
        self.message_store.add_arrival_listener(self.pull_request_hold_service.arrival_listener)
        if self.config.enable_calc_filter_bit_map or self.store_config.enable_consume_queue_ext:
            from orbitmq.broker.filter import CommitLogDispatcherCalcBitMap

            # BrokerController: getDispatcherList().addFirst(new CommitLogDispatcherCalcBitMap(..)),
            # which checks enableCalcFilterBitMap per record (updateBrokerConfig may turn it on);
            # left out when neither key is on, so the default dispatch pays nothing for it
            self.message_store.add_first_dispatcher(CommitLogDispatcherCalcBitMap(
                self.consumer_filter_manager, lambda: self.config.enable_calc_filter_bit_map))
        await self.message_store.start()
        await self._start_ha_service()
        await self.schedule_message_service.start(self.message_store)  # delay levels
        await self.timer_message_store.start(self.message_store)  # timer wheel (delivers once master)
        await self.pull_request_hold_service.start()
        await self.stats.start()
        await self.send_queue.start()
        if not ephemeral:
            await self.remoting_server.start()
            await self._start_fast_server()
        # --- POP (services/broker/pop): revive service, POP long polling, order info ---
        await self.pop_service.start()
        # BrokerController#start: a broker of a replicated set with acting master starts isolated
        # (no registration, no special services) until BrokerPreOnlineService brings it online.
        acting = self.acting_master
        acting.isolated = (self.config.enable_slave_acting_master and self.store_config.total_replicas > 1
                           and not self.config.enable_controller_mode)
        # Both started above (delay delivery unless SLAVE, POP revive always): a slave stops them.
        self._special_services_on = True
        await self.change_special_service_status(self.store_config.broker_role != SLAVE and not acting.isolated)
        if self._special_services_on:
            self.transaction_check_service.start()  # a master from the start: the early return above skips it
        self._register_now = asyncio.Event()
        self._scan_kick = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._register_loop(), name="registerBrokerAll"),
            asyncio.create_task(periodic(max(self.config.flush_consumer_offset_interval, 100) / 1000.0,
                                         self.consumer_offset_manager.persist_async, what="persist consumer offsets"),
                                name="persistConsumerOffset"),
            asyncio.create_task(periodic(10.0, self.consumer_filter_manager.persist_if_used,
                                         what="persist consumer filters"), name="persistConsumerFilter"),
            asyncio.create_task(self._scan_channels_loop(), name="ClientHousekeepingService"),
        ]
        self._started = True
        if self.replicas_manager is not None:
            await self.replicas_manager.start()  # fenced until the controller settled the role
        elif self.store_config.broker_role == SLAVE:
            self.slave_synchronize.start(None)  # the master address comes with the registration
        await self.register_broker_all(force=True)
        acting.start()
        if acting.isolated:
            from orbitmq.broker.failover.pre_online import BrokerPreOnlineService

            self.pre_online_service = BrokerPreOnlineService(self, acting)
            if self.config.skip_pre_online:
                await self.pre_online_service.start_service_without_condition()
            else:
                self.pre_online_service.start()

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        await self.acting_master.shutdown()
        if self.pre_online_service is not None:
            await self.pre_online_service.shutdown()
        await self.escape_bridge.close()
        if self.replicas_manager is not None:
            await self.replicas_manager.shutdown()
        await self.slave_synchronize.shutdown()
        with contextlib.suppress(Exception):
            await self.outer_api.unregister_broker_all(
                self.config.namesrv_addr_list(), cluster_name=self.config.broker_cluster_name,
                broker_addr=self.config.broker_addr, broker_name=self.config.broker_name,
                broker_id=self.config.broker_id)
        await self.pull_request_hold_service.shutdown()
        await self.stats.shutdown()
        # --- POP (services/broker/pop): stop reviving and persist order info before offsets ---
        await self.pop_service.shutdown()
        await self.transaction_check_service.shutdown()
        await self.send_queue.shutdown()
        await self.remoting_server.close()
        if self.fast_remoting_server is not None:
            await self.fast_remoting_server.close()
        for task in list(self._background):
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task
        await asyncio.to_thread(self._persist_all)
        await self.schedule_message_service.shutdown()  # delay levels: persist delayOffset.json
        await self.timer_message_store.shutdown()  # timer wheel: flush wheel, log, timercheck
        if self.ha_service is not None:
            await self.ha_service.shutdown()
        if self.message_store is not None:
            await self.message_store.shutdown()
        await self.outer_api.close()
        await self._stop_metrics()
        log.info("the broker[%s, %s] shutdown OK", self.config.broker_name, self.config.broker_addr)

    async def abort_start(self) -> None:
        """Release what a failed start() acquired (listening socket, store lock, clients)."""
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        closers = [self.remoting_server.close, self.pull_request_hold_service.shutdown,
                   self.stats.shutdown, self.send_queue.shutdown, self.outer_api.close,
                   self.slave_synchronize.shutdown, self.timer_message_store.shutdown,
                   self.transaction_check_service.shutdown]
        if self.replicas_manager is not None:
            closers.insert(0, self.replicas_manager.shutdown)
        if self.ha_service is not None:
            closers.append(self.ha_service.shutdown)
        if self.fast_remoting_server is not None:
            closers.append(self.fast_remoting_server.close)
        for close in closers:
            with contextlib.suppress(Exception):
                await close()
        if self.message_store is not None:
            with contextlib.suppress(Exception):
                await self.message_store.shutdown()
        await self._stop_metrics()

    # ---- metrics and readiness (services/broker/metrics) -------------------------------------

    async def _start_metrics(self) -> None:
        """/metrics and /ready first, so a probe or scrape during recovery gets an answer."""
        from orbitmq.common.metrics import hub

        if self.metrics is not None:
            self.metrics.register()
        hub().add_readiness(self._readiness_name(), self.readiness)
        try:
            await hub().acquire(self.config, default_host=self.config.broker_ip1)
        except BaseException:
            await self._stop_metrics()
            raise

    async def _stop_metrics(self) -> None:
        from orbitmq.common.metrics import hub

        hub().remove_readiness(self._readiness_name())
        if self.metrics is not None:
            self.metrics.unregister()
        with contextlib.suppress(Exception):
            await hub().release(self.config)

    def _readiness_name(self) -> str:
        return f"broker {self.config.broker_name}@{self.config.broker_ip1}:{id(self):x}"

    def readiness(self) -> bool | str:
        """Ready once the store is recovered and the role assigned (controller mode: unfenced)."""
        if not self._started or self.message_store is None:
            return "store recovering"
        if self._fenced:
            return "waiting for the controller to assign a role"
        return True

    def _timed(self, code: int, processor: Processor) -> Processor:
        return processor if self.metrics is None else self.metrics.timed(code, processor)

    async def _start_fast_server(self) -> None:
        """Listen on listenPort - 2 too, serving what the main server serves but the pulling requests.

        Upstream refuses to start when that port is taken; OrbitMQ warns and runs without it (as
        it does for a derived haListenPort), since only clients with vipChannelEnabled need it.
        """
        port = max(self.config.listen_port - 2, 0)
        server = RemotingServer(self.listen_host, port,
                                max_concurrent_requests=self.config.pull_thread_pool_queue_capacity,
                                **server_limits(self.config))
        for code, processor in self.processors.table.items():
            if code not in FAST_SERVER_EXCLUDED:
                server.register(code, self._timed(code, processor))
        if self._guard is not None:
            server.set_guard(self._guard)
        server.on_connect(self._on_client_connect)
        try:
            await server.start()
        except OSError as exc:
            log.warning("fast remoting server (VIP channel) port %d (listenPort - 2) is not available (%s); "
                        "clients with vipChannelEnabled cannot reach this broker", port, exc)
            return
        self.fast_remoting_server = server

    # ---- replication ----------------------------------------------------------------------

    def _check_replication_config(self) -> None:
        """Refuse combinations upstream refuses at start-up (BrokerStartup)."""
        cfg = self.config
        warning = sync_master_ack_warning(cfg, self.store_config)
        if warning:
            log.warning(warning)
        if cfg.enable_d_leger_commit_log:
            if cfg.enable_controller_mode:
                raise ValueError("The config enableControllerMode and enableDLegerCommitLog cannot both be true.")
            raise ValueError("enableDLegerCommitLog=true: OrbitMQ has no DLedger CommitLog; "
                             "use enableControllerMode=true for automatic failover")
        if cfg.enable_controller_mode:
            if not cfg.controller_addr_list():
                raise ValueError("enableControllerMode=true needs controllerAddr (e.g. 127.0.0.1:9878)")
            # The controller decides the role and id; until then the broker is a (fenced) slave.
            self.store_config.broker_role = SLAVE
            return
        if self.store_config.broker_role == SLAVE:
            if cfg.broker_id <= 0:
                raise ValueError("Slave's brokerId must be > 0")
        elif cfg.broker_id != 0:
            log.info("brokerRole=%s: brokerId %d becomes 0 (MASTER_ID)", self.store_config.broker_role,
                     cfg.broker_id)
            cfg.broker_id = 0

    def _check_broker_identity(self) -> None:
        from orbitmq.broker.ha.broker_identity import BrokerIdentityStore

        cfg = self.config
        identity = BrokerIdentityStore(cfg.broker_identity_path(self.store_config.store_path_root_dir),
                                       cfg.broker_cluster_name, cfg.broker_name)
        identity.load_broker_id()
        identity.load_temp()

    async def _start_ha_service(self) -> None:
        """AutoSwitchHAService + ReplicasManager in controller mode, else DefaultHAService."""
        store = self.message_store
        if self.config.enable_controller_mode:
            from orbitmq.broker.ha.epoch_file import EpochFileCache
            from orbitmq.broker.ha.ha_service import AutoSwitchHAService
            from orbitmq.broker.ha.replicas_manager import ReplicasManager

            self.epoch_cache = EpochFileCache(self.store_config.epoch_file_path)
            await asyncio.to_thread(self.epoch_cache.load)
            self.ha_service = AutoSwitchHAService(store, self.config, self.store_config, self.epoch_cache)
        else:
            from orbitmq.broker.ha.classic_ha import DefaultHAService

            self.ha_service = DefaultHAService(store, self.config, self.store_config)
        store.replication.attach_ha_service(self.ha_service)
        try:
            await self.ha_service.start()
        except OSError as exc:
            if not self.config.ha_listen_port_derived or self.config.ha_listen_port <= 0:
                raise
            # haListenPort was not configured and listenPort + 1 is taken (another process, or an
            # outgoing connection's local port): any free port will do, slaves learn it from the
            # NameServer registration. A configured haListenPort that is taken fails the start.
            log.warning("HA port %d (listenPort + 1) is not available (%s); using a free port",
                        self.config.ha_listen_port, exc)
            self.config.ha_listen_port = 0
            await self.ha_service.start()
        if self.config.ha_listen_port <= 0:  # ephemeral: register the port the OS picked
            self.config.ha_listen_port = self.ha_service.listen_port
        if self.config.enable_controller_mode:
            self.replicas_manager = ReplicasManager(self, self.ha_service, self.epoch_cache)
        elif self.store_config.broker_role == SLAVE and self.store_config.ha_master_address:
            self._master_ha_addr = self.store_config.ha_master_address
            self.ha_service.update_master_address(self.store_config.ha_master_address)

    def set_fenced(self, fenced: bool) -> None:
        """Controller mode before RUNNING: no puts (14), no NameServer registration."""
        self._fenced = fenced
        store = self.message_store
        if store is not None:
            if fenced:
                store.running_flags.get_and_make_not_writeable()
            else:
                store.running_flags.get_and_make_writeable()

    @property
    def fenced(self) -> bool:
        """Read-only: only set_fenced changes it, together with the store's writeable flag."""
        return self._fenced

    # update_state_version and start/stop_slave_synchronize are the ReplicaHost side of the
    # ReplicasManager (services/broker/ha/replicas_manager.py): it sees the broker through that
    # narrow Protocol (and its tests through a small fake) rather than through its services.

    def update_state_version(self, master_epoch: int) -> None:
        """The registration's DataVersion.stateVersion is the master epoch, so the NameServer
        keeps the newest master when two addresses claim brokerId 0 (upstream #6317)."""
        self.topic_config_manager.data_version.next_version(master_epoch)

    def start_slave_synchronize(self, master_addr: str | None) -> None:
        self.slave_synchronize.start(master_addr)

    def stop_slave_synchronize(self) -> None:
        self.slave_synchronize.stop()

    async def change_special_service_status(self, master: bool) -> None:
        """Delay-level delivery and POP revive write to the store: a master's job only."""
        if self._special_services_on == master:
            return
        self._special_services_on = master
        revive = self.pop_service.revive_service
        if master:
            self.transaction_check_service.start()  # rebuilds the open-transaction index first
            self.schedule_message_service.start_delivery()
            self.timer_message_store.set_dequeue_active(True)
            revive.queues.clear()  # revive offsets may have moved on the old master: re-read them
            # Before the first pop: the copied pop offsets are older than the replicated checkpoints.
            await raise_pop_offsets(self.pop_service, self.slave_synchronize.offsets_copied_at_ms)
            await revive.start()
        else:
            await self.transaction_check_service.shutdown()
            self.transactional_message_service.reset()
            await self.schedule_message_service.stop_delivery()
            self.timer_message_store.set_dequeue_active(False)
            await revive.shutdown()

    def _load_auth_metadata(self) -> None:
        """Blocking: read users/ACLs and create the config's Super users when missing."""
        self.auth_store.load()
        if self.auth_store.ensure_super_users(self.config.bootstrap_users()):
            self.auth_store.persist()

    def _persist_all(self) -> None:
        for manager in (self.consumer_offset_manager, self.topic_config_manager, self.subscription_group_manager,
                        self.consumer_filter_manager):
            try:
                manager.persist()  # topics and groups: a whole snapshot, the journal emptied
            except Exception:
                log.exception("persist %s failed", manager.path)
        for manager in (self.topic_config_manager, self.subscription_group_manager):
            manager.close()

    # ---- seams ----------------------------------------------------------------------------

    def register_processor(self, code: int, processor: Processor) -> None:
        self.processors.register(code, processor)
        if self._started:
            self.remoting_server.register(code, self._timed(int(code), self.processors.table[int(code)]))
            if self.fast_remoting_server is not None and code not in FAST_SERVER_EXCLUDED:
                self.fast_remoting_server.register(code, self._timed(int(code), self.processors.table[int(code)]))

    def on_metadata_changed(self, *, topics: bool = False, groups: bool = False) -> None:
        """Make the changes durable and tell every NameServer now (in the background): the
        changed topics only (registerIncrementBrokerData), never the whole table; groups are
        not registered anywhere. A deleted topic is not re-registered, as upstream's
        AdminBrokerProcessor#deleteTopic: mqadmin deleteTopic removes it from the NameServers."""
        self._persist_topics |= topics
        self._persist_groups |= groups
        self._spawn(self._persist_changed())
        if topics:
            self._spawn(self.register_increment_broker_data(wait=False))

    async def topics_changed(self) -> None:
        """on_metadata_changed(topics=True), returning once the increment is registered (or
        failed), as upstream's admin processor answers after registerIncrementBrokerData."""
        await self.topic_config_manager.sync_async()
        await self.register_increment_broker_data()

    async def _persist_changed(self) -> None:
        if self._persist_topics:
            self._persist_topics = False
            await self.topic_config_manager.sync_async()
        if self._persist_groups:
            self._persist_groups = False
            await self.subscription_group_manager.sync_async()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        except RuntimeError:
            if inspect.iscoroutine(coro):
                coro.close()
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # Keys that define the broker's identity or resources; changing them needs a restart.
    RUNTIME_CONFIG_BLACK_LIST = frozenset({
        "brokerClusterName", "brokerName", "brokerId", "brokerIP1", "brokerIP2", "listenPort", "haListenPort",
        "storePathRootDir", "storePathCommitLog", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
        "namesrvAddr", "sendMessageThreadPoolNums", "sendThreadPoolQueueCapacity", "flushDiskType",
        "brokerRole", "enableControllerMode", "storePathBrokerIdentity", "enableDLegerCommitLog", "brokerConfigPath",
        # The timer wheel's files are laid out by these: fixed while it runs.
        "timerWheelEnable", "timerPrecisionMs", "mappedFileSizeTimerLog"}) | AuthConfig.config_keys()

    def update_runtime_config(self, updates: dict[str, str]) -> dict[str, str]:
        """UPDATE_BROKER_CONFIG: validate every key first, then apply them all."""
        plan: list[tuple[Any, str, Any]] = []
        for key, raw in updates.items():
            if key in self.RUNTIME_CONFIG_BLACK_LIST:
                raise PermissionError(f"Can not update config in black list: {key}")
            for target in (self.config, self.store_config):
                field = type(target).config_fields().get(key)
                if field is not None:
                    parsed = type(target).from_mapping({key: raw})  # type-checks the value
                    plan.append((target, field.name, getattr(parsed, field.name)))
                    break
            else:
                raise ValueError(f"unknown config key {key}")
        old_perm = self.config.broker_permission
        for target, name, value in plan:
            setattr(target, name, value)
        self.topic_config_manager.auto_create_topic_enable = self.config.auto_create_topic_enable
        self.subscription_group_manager.auto_create_subscription_group = self.config.auto_create_subscription_group
        self.pull_request_hold_service.long_polling_enable = self.config.long_polling_enable
        self.pull_request_hold_service.short_polling_time_mills = self.config.short_polling_time_mills
        self.rebalance_lock_manager.max_live_millis = self.config.rebalance_lock_max_live_time
        self.consumer_manager.channel_expired_millis = self.config.channel_expired_timeout
        self.consumer_manager.subscription_expired_millis = self.config.subscription_expired_timeout
        self.producer_manager.channel_expired_millis = self.config.channel_expired_timeout
        self._scan_kick.set()
        if self.config.broker_permission != old_perm:
            self._register_now.set()  # routes must show the new permission at once
        return {key: updates[key] for key in updates}

    # ---- messages in and out ----------------------------------------------------------------
    # What several processors share beyond the store's own calls (see the module docstring):
    # building inner messages, the puts and gets that count stats and metrics, guarded reads.

    @staticmethod
    def now_ms() -> int:
        """The broker's clock: a method so that a processor's test can hand it a fake broker
        with its own clock."""
        return now_ms()

    @staticmethod
    def remote_addr(channel: Any) -> str:
        """The client's "host:port" for logs and bornHost ("unknown" when the channel has none)."""
        return str(getattr(channel, "remote_address", None) or "unknown")

    def new_inner_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          sys_flag: int, born_timestamp: int, born_host: str, reconsume_times: int,
                          copy_properties: bool = True,
                          properties_string: str | None = None) -> MessageExtBrokerInner:
        """``copy_properties=False`` hands ``properties`` over as is: for callers that built the
        dict for this message alone (a batch item), saving one copy per message.

        ``properties_string``: the string ``properties`` was parsed from, when it is exactly what
        properties_to_string(properties) gives (parse_properties_exact says so). It is stored as
        is, and the parse goes to dispatch with the message (parsed_properties), so the store
        neither re-encodes nor re-parses it; the caller does not change ``properties`` afterwards.
        """
        if properties_string is None:
            props_s = properties_to_string(properties) if properties else ""
            parsed = None
            own = dict(properties) if copy_properties else properties
        elif copy_properties:
            # One copy either way: the message gets its own dict, dispatch keeps the parse.
            props_s, own = properties_string, dict(properties)
            parsed = (properties_string, properties)
        else:
            props_s, own = properties_string, properties
            parsed = (properties_string, dict(properties))
        tags = properties.get(MessageConst.TAGS)
        # Positional, in the dataclass's field order (half the cost of keywords, per message):
        # topic, queue_id, body, flag, properties, properties_string, tags_code, born_timestamp,
        # born_host, store_host, reconsume_times, sys_flag, prepared_transaction_offset,
        # store_timestamp, body_crc, parsed_properties.
        return MessageExtBrokerInner(
            topic, queue_id, body, flag, own, props_s, tags_hash_code(tags) if tags else 0, born_timestamp,
            _parse_born_host(born_host), None, reconsume_times, sys_flag, 0, 0, 0, parsed)

    def new_batch_inner_messages(self, *, topic: str, queue_id: int, sys_flag: int, born_timestamp: int,
                                 born_host: str, reconsume_times: int,
                                 items: list[tuple[int, bytes, dict[str, str], str | None]],
                                 undelayed: bool = False) -> list[MessageExtBrokerInner]:
        """new_inner_message(copy_properties=False) for every (flag, body, properties,
        properties_string) of one batch, with what the batch's messages share computed once.

        ``undelayed``: the batch goes to put_messages(undelayed=True). When that leaves no put
        hook to run, nobody can change ``properties`` before the append, so dispatch gets that
        very dict instead of a copy (the same content, one dict less per message).
        """
        share = undelayed and all(getattr(hook, "only_delayed", False)
                                  for hook in self.message_store.put_message_hooks)
        host = _parse_born_host(born_host)
        inner = MessageExtBrokerInner
        out = []
        append = out.append
        # A batch's messages mostly share their tag: its hash code is computed once per run.
        last_tags = None
        tags_code = 0
        for flag, body, properties, props_s in items:
            if props_s is None:
                props_s = properties_to_string(properties) if properties else ""
                parsed = None
            else:
                parsed = (props_s, properties if share else properties.copy())
            tags = properties.get(_TAGS)
            if tags != last_tags:
                last_tags = tags
                tags_code = tags_hash_code(tags) if tags else 0
            # Positional, in field order, as in new_inner_message.
            append(inner(topic, queue_id, body, flag, properties, props_s, tags_code,
                         born_timestamp, host, None, reconsume_times, sys_flag, 0, 0, 0, parsed))
        return out

    # Every put and get is counted here, where all processors (send, send-back, DLQ, revive,
    # schedule delivery, pull, POP) meet, instead of in each of them. The topic is read after
    # the put, as upstream: a delayed send counts against SCHEDULE_TOPIC_XXXX (the delay hook
    # redirects the message in place) and its delivery against the real topic, once each.

    async def put_message(self, msg: MessageExtBrokerInner) -> Any:
        result = await self.message_store.put_message(msg)
        appended = result.append_message_result
        if appended is not None and appended.status is _APPEND_PUT_OK:
            self.stats.on_put(msg.topic, appended.msg_num, appended.wrote_bytes)
            if self.metrics is not None:
                self.metrics.on_put(msg.topic, msg.properties, msg.sys_flag, appended.msg_num, appended.wrote_bytes)
        return result

    async def put_messages(self, msgs: list[MessageExtBrokerInner], *, undelayed: bool = False) -> Any:
        result = await self.message_store.put_messages(msgs, undelayed=undelayed)
        appended = result.append_message_result
        if appended is not None and appended.status is _APPEND_PUT_OK and msgs:
            self.stats.on_put(msgs[0].topic, appended.msg_num, appended.wrote_bytes)
            if self.metrics is not None:
                self.metrics.on_put(msgs[0].topic, msgs[0].properties, msgs[0].sys_flag, appended.msg_num,
                                    appended.wrote_bytes)
        return result

    async def put_batch(self, *, topic: str, queue_id: int, sys_flag: int, born_timestamp: int, born_host: str,
                        reconsume_times: int, items: list[tuple[int, bytes, dict[str, str], str | None]]) -> Any:
        """put_messages(new_batch_inner_messages(..., undelayed=True), undelayed=True), without
        building the messages when the store can append the tuples as they are."""
        built: list[MessageExtBrokerInner] = []

        def build() -> list[MessageExtBrokerInner]:
            built[:] = self.new_batch_inner_messages(
                topic=topic, queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp,
                born_host=born_host, reconsume_times=reconsume_times, items=items, undelayed=True)
            return built

        result = await self.message_store.put_uniform_batch(
            topic, queue_id, sys_flag, born_timestamp, _parse_born_host(born_host), reconsume_times, items, build)
        appended = result.append_message_result
        if appended is not None and appended.status is _APPEND_PUT_OK and items:
            # As put_messages: the topic after the put hooks, when they ran.
            self.stats.on_put(built[0].topic if built else topic, appended.msg_num, appended.wrote_bytes)
            if self.metrics is not None:
                self.metrics.on_put(built[0].topic if built else topic, items[0][2], sys_flag, appended.msg_num,
                                    appended.wrote_bytes)
        return result

    async def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                          max_total_size: int | None, message_filter: Any) -> Any:
        result = self.message_store.get_message(
            group, topic, queue_id, offset, max_msg_nums, max_total_size or MAX_PULL_BYTES, message_filter)
        if result is not None:
            self.stats.on_get(result.message_count if result.status is _GET_FOUND else 0)
            if self.metrics is not None and result.status is _GET_FOUND:
                self.metrics.on_read(group, topic, result.message_count, result.buffer_total_size)
        return result

    def message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset (DefaultMessageStore#getMessageStoreTimeStamp,
        -1 when it is gone), 0 when reading it fails: the stats requests (GET_TOPIC_STATS_INFO,
        GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS) and the lag metrics read it for every queue,
        and one queue unmapped by retention meanwhile must not fail them."""
        try:
            return int(self.message_store.get_message_store_timestamp(topic, queue_id, queue_offset) or 0)
        except Exception:
            log.debug("no store timestamp for %s@%d:%d", topic, queue_id, queue_offset, exc_info=True)
            return 0

    async def query_message(self, topic: str, key: str, max_num: int, begin: int,
                            end: int) -> tuple[list[bytes], int, int]:
        """Records whose KEYS or UNIQ_KEY equal ``key``, newest first, from the index.

        The index matches key hashes, so each candidate record is checked for the real key.
        On the broker because QUERY_MESSAGE, RECALL_MESSAGE and RESUME_CHECK_HALF_MESSAGE all
        look messages up by key (``DefaultMessageStore#queryMessage`` plus the key check).
        """
        index = self.message_store.index_service
        if index is None:
            return [], 0, 0
        found = await asyncio.to_thread(index.query_offset, topic, key, max_num, begin, end)
        records: list[bytes] = []
        for phy_offset in found.phy_offsets:
            record = self.message_store.select_one_message_by_offset(phy_offset)
            if not record:
                continue
            try:
                msg = decode_record(record, 0, check_crc=False)
            except RecordError:
                continue
            if msg.topic == topic and (key in msg.keys or msg.uniq_key == key):
                records.append(bytes(record))
        return records, int(found.index_last_update_timestamp), int(found.index_last_update_phyoffset)

    async def delete_topics(self, topics: set[str]) -> None:
        """Drop the topics' queues and their per-topic stats together (DELETE_TOPIC_IN_BROKER,
        cleanUnusedTopic), so a topic created again starts its counts at zero."""
        await self.message_store.delete_topics(topics)
        self.stats.forget_topics(topics)

    def notify_reset_offset(self, group: str, fields: dict[str, str], body: bytes) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (oneway) to every online consumer of the group
        (Broker2Client#resetOffset); the oneways are the broker's background tasks, awaited at
        shutdown like NOTIFY_CONSUMER_IDS_CHANGED's."""
        info = self.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return
        for channel in info.channels():
            request = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(fields), body)
            self._spawn(self._oneway(channel, request))

    def _max_offset_or_zero(self, topic: str, queue_id: int) -> int:
        if self.message_store is None:
            return 0
        return int(self.message_store.get_max_offset_in_queue(topic, queue_id))

    # ---- clients ----------------------------------------------------------------------------

    def _on_client_connect(self, channel: Any) -> None:
        channel.on_close(self._on_client_close)

    def _on_client_close(self, channel: Any) -> None:
        self.pull_request_hold_service.drop_channel(channel)
        self.producer_manager.do_channel_close_event(channel)
        self.consumer_manager.do_channel_close_event(channel)

    def _on_consumer_ids_changed(self, group: str, channels: list[Any]) -> None:
        group_config = self.subscription_group_manager.get(group)
        if group_config is not None and not group_config.notify_consumer_ids_changed_enable:
            return
        for channel in channels:
            request = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})
            self._spawn(self._oneway(channel, request))

    @staticmethod
    async def _oneway(channel: Any, request: RemotingCommand) -> None:
        try:
            await channel.invoke_oneway(request)
        except Exception as exc:
            log.info("notify consumer %s failed: %s", getattr(channel, "remote_address", channel), exc)

    # ---- NameServer registration ---------------------------------------------------------------

    def _topic_configs_for_registration(self, configs: list[Any] | None = None) -> list[Any]:
        if configs is None:
            configs = self.topic_config_manager.all()
        perm = self.config.broker_permission
        if not is_writeable(perm) or not is_readable(perm):
            # A read-only (or write-only) broker advertises that on every topic, as upstream.
            from dataclasses import replace
            configs = [replace(tc, perm=tc.perm & perm & (PERM_READ | PERM_WRITE)) for tc in configs]
        return configs

    async def register_increment_broker_data(self, *, wait: bool = True) -> None:
        """BrokerController#registerIncrementBrokerData: REGISTER_BROKER carrying only the topics
        created or changed since the last one, with the current dataVersion. Changes that come
        while one is in flight go together in the next. ``wait``: return once it was answered
        (at most registerBrokerTimeoutMills). A NameServer that refuses it (it does not know
        this broker yet: a one-topic table before the first full registration) gets the whole
        table at once."""
        changed = self.topic_config_manager.take_unregistered()
        for tc in changed:
            self._increment_pending[tc.topic_name] = tc
        if not self.config.namesrv_addr_list() or self._fenced or not self._started:
            self._increment_pending.clear()
            return
        if not self._increment_pending and (self._increment_task is None or self._increment_task.done()):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._increment_waiters.append(future)
        if self._increment_task is None or self._increment_task.done():
            self._increment_task = asyncio.create_task(self._increment_loop(), name="registerIncrementBrokerData")
            self._background.add(self._increment_task)
            self._increment_task.add_done_callback(self._background.discard)
        if wait:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), self.outer_api.timeout)

    async def _increment_loop(self) -> None:
        while self._increment_pending or self._increment_waiters:
            batch, self._increment_pending = self._increment_pending, {}
            waiters, self._increment_waiters = self._increment_waiters, []
            try:
                if batch:
                    if self._full_in_flight:
                        self._resend_after_full.update(batch)
                    manager = self.topic_config_manager
                    with manager._lock:
                        configs = [tc for tc in map(manager.topic_config_table.get, batch) if tc is not None]
                        version = manager.data_version.to_json_dict()
                    if configs:
                        results = await self.outer_api.register_topics(
                            self.config.namesrv_addr_list(), cluster_name=self.config.broker_cluster_name,
                            broker_addr=self.config.broker_addr, broker_name=self.config.broker_name,
                            broker_id=self.config.broker_id, ha_server_addr=self.config.ha_server_addr,
                            topic_configs=self._topic_configs_for_registration(configs), data_version=version)
                        if any(result is None for result in results.values()):
                            self._register_now.set()  # the whole table, from the register loop
            except Exception:
                log.exception("registerIncrementBrokerData failed")
                self._register_now.set()
            finally:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)

    async def register_broker_all(self, *, force: bool | None = None) -> dict[str, RegisterBrokerResult | None]:
        """Register with every NameServer (not while fenced); a slave learns its master here.

        As BrokerController#registerBrokerAll: the whole table, in splitRegistrationSize chunks
        with enableSplitRegistration; with forceRegister=false only when a NameServer's
        QUERY_DATA_VERSION says it holds another dataVersion (needRegister)."""
        addrs = self.config.namesrv_addr_list()
        if not addrs or self._fenced or self.acting_master.isolated:
            return {}
        if force is None:
            force = self.config.force_register
        common = {"cluster_name": self.config.broker_cluster_name, "broker_addr": self.config.broker_addr,
                  "broker_name": self.config.broker_name, "broker_id": self.config.broker_id}
        split = self.config.split_registration_size if self.config.enable_split_registration else 0
        if not split and not force and not await self.outer_api.need_register(
                addrs, **common, data_version=self.topic_config_manager.data_version.to_json_dict()):
            return {}
        self._full_in_flight += 1
        try:
            with self.topic_config_manager._lock:
                configs = self._topic_configs_for_registration()
                version = self.topic_config_manager.data_version.to_json_dict()
            results = await self.outer_api.register_broker_all(
                addrs, **common, ha_server_addr=self.config.ha_server_addr, topic_configs=configs,
                data_version=version, split_size=split)
        finally:
            self._full_in_flight -= 1
        if not self._full_in_flight and self._resend_after_full:
            names, self._resend_after_full = self._resend_after_full, set()
            manager = self.topic_config_manager
            with manager._lock:
                for name in names:
                    tc = manager.topic_config_table.get(name)
                    if tc is not None:
                        self._increment_pending.setdefault(name, tc)
            self._spawn(self.register_increment_broker_data(wait=False))
        if self.replicas_manager is not None:
            self.replicas_manager.on_register_results(results)
        elif self.store_config.broker_role == SLAVE:
            self._on_classic_slave_registered(results)
        return results

    def _on_classic_slave_registered(self, results: dict[str, RegisterBrokerResult | None]) -> None:
        for result in results.values():
            if result is None or not result.master_addr:
                continue
            self.slave_synchronize.master_addr = result.master_addr
            if (not self.store_config.ha_master_address and result.ha_server_addr
                    and result.ha_server_addr != self._master_ha_addr):
                log.info("master HA address of %s is %s", self.config.broker_name, result.ha_server_addr)
                self._master_ha_addr = result.ha_server_addr
                self.ha_service.update_master_address(result.ha_server_addr)
            return

    # The classic slave's master HA address, set and cleared by the acting-master service
    # (services/broker/failover/acting_master.py) as the master goes and comes back.

    def clear_master_ha_address(self) -> None:
        self._master_ha_addr = None
        if self.ha_service is not None:
            self.ha_service.update_master_address(None)

    def set_master_ha_address(self, ha_addr: str) -> None:
        if ha_addr != self._master_ha_addr:
            self._master_ha_addr = ha_addr
            self.ha_service.update_master_address(ha_addr)

    def wake_register(self) -> None:
        """Register now (a slave learns its master's addresses from the answer)."""
        self._register_now.set()

    def _register_period(self) -> float:
        # A classic slave that does not know its master yet asks every second rather than every
        # registerNameServerPeriod (the master may simply have started later). Controller-mode
        # slaves do the same in ReplicasManager.
        if (self.replicas_manager is None and self.store_config.broker_role == SLAVE
                and self._master_ha_addr is None):
            return 1.0
        return max(self.config.register_name_server_period, 1000) / 1000.0

    async def _register_loop(self) -> None:
        while True:
            woken = False
            with contextlib.suppress(TimeoutError):
                woken = await asyncio.wait_for(self._register_now.wait(), self._register_period())
            self._register_now.clear()
            try:
                # Asked for (a refused increment, a role change): whatever forceRegister says.
                await self.register_broker_all(force=True if woken else None)
            except Exception:
                log.exception("registerBrokerAll failed")

    async def _scan_channels_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                # Woken early when the interval is changed at runtime (UPDATE_BROKER_CONFIG).
                await asyncio.wait_for(self._scan_kick.wait(), max(self.config.client_channel_scan_interval, 100) / 1000.0)
            self._scan_kick.clear()
            for channel in self.consumer_manager.scan_not_active_channel() + self.producer_manager.scan_not_active_channel():
                with contextlib.suppress(Exception):
                    await channel.close()

    # ---- processors -----------------------------------------------------------------------

    def _register_default_processors(self) -> None:
        from orbitmq.broker.processors.admin import AdminBrokerProcessor
        from orbitmq.broker.processors.client_manage import ClientManageProcessor
        from orbitmq.broker.processors.connections import ConnectionsProcessor
        from orbitmq.broker.processors.consumer_manage import ConsumerManageProcessor
        from orbitmq.broker.processors.pull import PullMessageProcessor
        from orbitmq.broker.processors.query import QueryMessageProcessor
        from orbitmq.broker.processors.replica import ReplicaProcessor  # 907; 1007, 1008 (controller mode)
        from orbitmq.broker.processors.send import SendMessageProcessor
        from orbitmq.broker.processors.send_back import SendBackProcessor  # CONSUMER_SEND_MSG_BACK
        from orbitmq.broker.processors.store_admin import StoreAdminProcessor  # 306, 316, 321

        for processor_class in (SendMessageProcessor, PullMessageProcessor, QueryMessageProcessor,
                                ClientManageProcessor, ConsumerManageProcessor, AdminBrokerProcessor,
                                ConnectionsProcessor, SendBackProcessor, ReplicaProcessor, StoreAdminProcessor):
            processor_class(self).register()
        # --- RECALL_MESSAGE (services/broker/recall); SEND_REPLY_MESSAGE(_V2) (processors/reply.py) ---
        from orbitmq.broker.processors.reply import ReplyMessageProcessor
        from orbitmq.broker.recall.processor import RecallMessageProcessor

        RecallMessageProcessor(self).register()
        ReplyMessageProcessor(self).register()
        # --- POP (services/broker/pop): POP_MESSAGE, ACK/BATCH_ACK, CHANGE_INVISIBLETIME, NOTIFICATION ---
        from orbitmq.broker.pop.service import PopService

        self.pop_service = PopService(self)
        self.pop_service.register()
        # --- transactions (services/broker/transaction): END_TRANSACTION, half-message checks,
        # RESUME_CHECK_HALF_MESSAGE ---
        from orbitmq.broker.transaction.check import TransactionalMessageCheckService
        from orbitmq.broker.transaction.end_transaction import EndTransactionProcessor
        from orbitmq.broker.transaction.resume_check import ResumeCheckHalfMessageProcessor
        from orbitmq.broker.transaction.service import TransactionalMessageService

        self.transactional_message_service = TransactionalMessageService(self)
        EndTransactionProcessor(self, self.transactional_message_service).register()
        ResumeCheckHalfMessageProcessor(self, self.transactional_message_service).register()
        self.transaction_check_service = TransactionalMessageCheckService(self, self.transactional_message_service)
        if getattr(self, "metrics", None) is not None:
            self.metrics.set_half_messages_source(self.transactional_message_service.half_messages)

