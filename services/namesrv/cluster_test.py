"""Cluster-test mode (``clusterTest=true``): a test environment's NameServer that falls back to production.

As upstream's ClusterTestRequestProcessor: GET_ROUTEINFO_BY_TOPIC is answered from this
NameServer's own routes, and a topic it does not know is looked up in the NameServers of the
product environment (``productEnvName``), so a test cluster can use production topics it does not
host. Those NameServers are found the way RocketMQ's admin client finds any
(ClientConfig#namesrvAddr, MQClientAPIImpl#fetchNameServerAddr): the NAMESRV_ADDR environment
variable, else the address server's list for the unit ``productEnvName``
(DefaultTopAddressing#fetchNSAddr: ``http://<domain>:8080/rocketmq/<subgroup>-<unit>?nofix=1``).

Upstream reads the address server's domain and subgroup from the JVM system properties
``rocketmq.namesrv.domain`` (default ``jmenv.tbsite.net``) and ``rocketmq.namesrv.domain.subgroup``
(default ``nsaddr``); a Python process has none, so the environment variables
ROCKETMQ_NAMESRV_DOMAIN and ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP stand in for them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.request
from collections.abc import Callable

from orbitmq.client.namesrv_addr import parse_namesrv_addr
from orbitmq.common.constants import NAMESRV_ADDR_ENV
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand

log = logging.getLogger("orbitmq.namesrv")

DOMAIN_ENV = "ROCKETMQ_NAMESRV_DOMAIN"
SUBGROUP_ENV = "ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP"
DEFAULT_DOMAIN = "jmenv.tbsite.net"  # MixAll.DEFAULT_NAMESRV_ADDR_LOOKUP
DEFAULT_SUBGROUP = "nsaddr"
FETCH_TIMEOUT_S = 3.0  # DefaultTopAddressing#fetchNSAddr's 3000 ms
# MQClientInstance refetches the address server's list every 2 minutes.
ADDRESS_REFRESH_S = 120.0
ROUTE_TIMEOUT_S = 3.0


def ws_addr(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """MixAll#getWSAddr: port 8080 unless the domain names its own port."""
    domain = environ.get(DOMAIN_ENV) or DEFAULT_DOMAIN
    subgroup = environ.get(SUBGROUP_ENV) or DEFAULT_SUBGROUP
    if ":" in domain:
        return f"http://{domain}/rocketmq/{subgroup}"
    return f"http://{domain}:8080/rocketmq/{subgroup}"


def address_server_url(unit_name: str, environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    url = ws_addr(environ)
    return f"{url}-{unit_name}?nofix=1" if unit_name.strip() else url


def fetch_address_list(url: str, timeout: float = FETCH_TIMEOUT_S) -> str | None:  # noqa: ASYNC109
    """The first line of the address server's answer ("a:9876;b:9876"), None when it has none.

    Blocking: called on a worker thread.
    """
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (http by design)
            if response.status != 200:
                log.error("fetch nameserver address failed. statusCode=%s", response.status)
                return None
            text = response.read().decode("utf-8", "replace").strip()
    except OSError as exc:
        log.warning("connect to %s failed, maybe the domain name not bind in /etc/hosts: %s", url, exc)
        return None
    return text.splitlines()[0].strip() if text else None


class ProductEnvRoutes:
    """Asks the product environment's NameServers for routes this NameServer does not have."""

    def __init__(self, product_env_name: str, client: RemotingClient,
                 environ: dict[str, str] | os._Environ[str] = os.environ,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.product_env_name = product_env_name
        self._client = client
        self._environ = environ
        self._clock = clock
        self._fetched: list[str] = []
        self._fetched_at: float | None = None

    async def addresses(self) -> list[str]:
        explicit = self._environ.get(NAMESRV_ADDR_ENV)
        if explicit:
            return parse_namesrv_addr(explicit)
        now = self._clock()
        if self._fetched_at is None or now - self._fetched_at >= ADDRESS_REFRESH_S or not self._fetched:
            url = address_server_url(self.product_env_name, self._environ)
            text = await asyncio.to_thread(fetch_address_list, url)
            self._fetched_at = now
            try:
                self._fetched = parse_namesrv_addr(text) if text else []
            except ValueError as exc:
                log.error("the address server %s answered a bad NameServer list: %s", url, exc)
                self._fetched = []
        return self._fetched

    async def route_body(self, header_fields: dict[str, str]) -> bytes | None:
        """The product environment's TopicRouteData JSON for this GetRouteInfoRequestHeader, or None.

        Tried on each NameServer in turn, as the admin client does on a failed call; any failure
        is logged and answers None, so the caller replies TOPIC_NOT_EXIST as upstream does.
        """
        try:
            addrs = await self.addresses()
        except Exception:  # an address server fault must not fail the request
            log.exception("resolve the product environment's NameServers failed. envName=%s", self.product_env_name)
            return None
        for addr in addrs:
            # A fresh request each time: only the header's own fields, never the client's signature.
            forwarded = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header_fields)
            try:
                response = await self._client.invoke(addr, forwarded, timeout=ROUTE_TIMEOUT_S)
            except RemotingError as exc:
                log.info("get route info by topic from product environment failed. envName=%s, %s: %s",
                         self.product_env_name, addr, exc)
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                return response.body
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                return None
        return None
