"""TopicRouteCache: topic routes from any of several NameServers, refreshed in the background.

Routes are fetched on first use and then refreshed every ``refresh_interval`` seconds (30 s,
as MQClientInstance.updateTopicRouteInfoFromNameServer), so a broker that joins or leaves is
seen without a request paying for the lookup. Concurrent misses for one topic share a fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from orbitmq.client.api import MQClientAPI
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.common.route import ClusterInfo, TopicRouteData
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

log = logging.getLogger("orbitmq.client.route")


class TopicRouteCache:
    def __init__(self, api: MQClientAPI, namesrv_addrs: list[str], refresh_interval: float = 30.0,
                 idle_expiry: float = 300.0) -> None:
        if not namesrv_addrs:
            raise MQClientError("no NameServer address configured (namesrvAddr / NAMESRV_ADDR)")
        self.api = api
        self.namesrv_addrs = list(namesrv_addrs)
        self.refresh_interval = refresh_interval
        self.idle_expiry = idle_expiry
        self._routes: dict[str, TopicRouteData] = {}
        self._last_used: dict[str, float] = {}
        self._inflight: dict[str, asyncio.Future[TopicRouteData]] = {}
        self._next_ns = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._refresh_loop(), name="topic-route-refresh")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def cached(self, topic: str) -> TopicRouteData | None:
        return self._routes.get(topic)

    def get_cached(self, topic: str) -> TopicRouteData | None:
        """get() for a cached route, without a coroutine: the route (marked used), else None."""
        route = self._routes.get(topic)
        if route is not None:
            self._last_used[topic] = time.monotonic()
        return route

    def invalidate(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def invalidate_broker(self, broker_name: str) -> list[str]:
        """Drop every cached route naming ``broker_name`` (its master failed); returns those topics."""
        topics = [topic for topic, route in self._routes.items()
                  if any(bd.broker_name == broker_name for bd in route.broker_datas)]
        for topic in topics:
            self._routes.pop(topic, None)
        return topics

    async def get(self, topic: str) -> TopicRouteData:
        """The cached route, fetched on a miss; MQClientError(TOPIC_NOT_EXIST) for unknown topics."""
        self._last_used[topic] = time.monotonic()
        route = self._routes.get(topic)
        if route is not None:
            return route
        return await self.fetch(topic)

    async def fetch(self, topic: str) -> TopicRouteData:
        pending = self._inflight.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[TopicRouteData] = asyncio.get_running_loop().create_future()
        self._inflight[topic] = future
        try:
            route = await self._fetch_from_namesrv(topic)
            self._routes[topic] = route
            future.set_result(route)
            return route
        except BaseException as exc:
            self._routes.pop(topic, None)
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._inflight.pop(topic, None)

    def _namesrv_order(self) -> list[str]:
        start = self._next_ns % len(self.namesrv_addrs)
        self._next_ns += 1
        return self.namesrv_addrs[start:] + self.namesrv_addrs[:start]

    async def _fetch_from_namesrv(self, topic: str) -> TopicRouteData:
        last_error: BaseException | None = None
        not_exist: MQClientError | None = None
        for addr in self._namesrv_order():
            try:
                return await self.api.get_topic_route(addr, topic)
            except MQClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    not_exist = exc
                else:
                    last_error = exc
            except (MQBrokerError, RemotingError, OSError, ValueError) as exc:
                last_error = exc
        if not_exist is not None:
            raise not_exist
        raise MQClientError(f"get route of topic {topic} from NameServers {self.namesrv_addrs} failed: {last_error}")

    async def cluster_info(self) -> ClusterInfo:
        last_error: BaseException | None = None
        for addr in self._namesrv_order():
            try:
                return await self.api.get_cluster_info(addr)
            except (MQBrokerError, RemotingError, OSError, ValueError) as exc:
                last_error = exc
        raise MQClientError(f"get cluster info from NameServers {self.namesrv_addrs} failed: {last_error}")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_interval)
            now = time.monotonic()
            for topic in list(self._routes):
                if now - self._last_used.get(topic, 0.0) > self.idle_expiry:
                    self._routes.pop(topic, None)
                    self._last_used.pop(topic, None)
                    continue
                try:
                    self._routes[topic] = await self._fetch_from_namesrv(topic)
                except MQClientError as exc:
                    if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                        self._routes.pop(topic, None)
                    else:
                        log.warning("refresh route of %s failed: %s", topic, exc)
                except Exception:  # keep refreshing other topics whatever happens to one
                    log.exception("refresh route of %s failed", topic)
