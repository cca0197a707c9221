"""ACL 2.0 at the gRPC proxy: the servicer's methods, wrapped once, authenticate and authorize every RPC.

Installed only when ``authenticationEnabled`` or ``authorizationEnabled`` is set, so the default
path has no extra cost. Authentication checks the ``authorization``/``x-mq-date-time`` headers
(DefaultAuthenticationContextBuilder#build) on every unary RPC, every server stream and once at
the start of Telemetry; beyond upstream, a date-time further than
``authenticationMaxClockSkewMillis`` from the server's clock is refused, so a captured header
cannot be replayed forever. Authorization applies the (resource, action) table of
DefaultAuthorizationContextBuilder, including each Settings command on Telemetry.

Denials answer ``Code.UNAUTHORIZED`` (40100) in the response status, as upstream's proxy does for
both authentication and authorization failures (ResponseBuilder#buildStatus). Users and ACLs are
read from a master broker of the cluster (AUTH_GET_USER / AUTH_GET_ACL, signed with the inner
credentials) and cached for ``userCacheRefreshSecond`` / ``aclCacheRefreshSecond``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from orbitmq.auth.config import AuthConfig, whitelist
from orbitmq.auth.engine import Requirement, check_user, decide
from orbitmq.auth.model import (
    Acl,
    Action,
    AuthenticationError,
    AuthError,
    AuthorizationError,
    Resource,
    User,
    denial_reason,
)
from orbitmq.auth.signature import (
    AUTHORIZATION,
    DATE_TIME,
    grpc_clock_skew_ms,
    parse_grpc_authorization,
    verify_grpc_signature,
)
from orbitmq.common.namespace import wrap_namespace
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.errors import status
from orbitmq.remoting.codes import RequestCode, ResponseCode

log = logging.getLogger("orbitmq.proxy.auth")

_PREFIX = "/apache.rocketmq.v2.MessagingService/"
_PROTO_PACKAGE = "apache.rocketmq.v2."
_PUB = (Action.Pub,)
_SUB = (Action.Sub,)
_PUB_OR_SUB = (Action.Pub, Action.Sub)


def _topic(resource: Any) -> Resource:
    """The topic as the brokers know it, ``{namespace}%{name}``: the name a Remoting client's
    request to a broker carries for the same tenant, so one ACL covers both."""
    return Resource.topic(wrap_namespace(resource.resource_namespace, resource.name))


def _group(resource: Any) -> Resource:
    return Resource.group(wrap_namespace(resource.resource_namespace, resource.name))


def _group_topic(group: Any, topic: Any) -> list[Requirement]:
    return [(_group(group), _SUB), (_topic(topic), _SUB)]


_CONSUMER_TYPES = frozenset({pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER,
                             pb.LITE_PUSH_CONSUMER, pb.LITE_SIMPLE_CONSUMER})

# RPC name -> what its request needs (DefaultAuthorizationContextBuilder, gRPC half).
GRPC_REQUIREMENTS: dict[str, Callable[[Any], list[Requirement]]] = {
    "SendMessage": lambda r: [(_topic(r.messages[0].topic), _PUB)] if r.messages else [],
    "RecallMessage": lambda r: [(_topic(r.topic), _PUB)],
    "EndTransaction": lambda r: [(_topic(r.topic), _PUB)],
    "QueryRoute": lambda r: [(_topic(r.topic), _PUB_OR_SUB)],
    "Heartbeat": lambda r: [(_group(r.group), _SUB)] if r.client_type in _CONSUMER_TYPES and r.group.name else [],
    "ReceiveMessage": lambda r: _group_topic(r.group, r.message_queue.topic),
    "AckMessage": lambda r: _group_topic(r.group, r.topic),
    "ForwardMessageToDeadLetterQueue": lambda r: _group_topic(r.group, r.topic),
    "QueryAssignment": lambda r: _group_topic(r.group, r.topic),
    "ChangeInvisibleDuration": lambda r: [(_group(r.group), _SUB)],
    "NotifyClientTermination": lambda r: [(_group(r.group), _SUB)] if r.group.name else [],
    # Offset RPCs (not in upstream's table): reading or moving a group's position is consuming.
    "PullMessage": lambda r: _group_topic(r.group, r.message_queue.topic),
    "UpdateOffset": lambda r: _group_topic(r.group, r.message_queue.topic),
    "GetOffset": lambda r: _group_topic(r.group, r.message_queue.topic),
    "QueryOffset": lambda r: [(_topic(r.message_queue.topic), _SUB)],
}


def settings_requirements(settings: Any) -> list[Requirement]:
    """Telemetry Settings: Pub on each published topic; Sub on the group and each subscribed topic."""
    which = settings.WhichOneof("pub_sub")
    if which == "publishing":
        return [(_topic(t), _PUB) for t in settings.publishing.topics]
    if which == "subscription":
        sub = settings.subscription
        out: list[Requirement] = [(_group(sub.group), _SUB)] if sub.group.name else []
        out.extend((_topic(e.topic), _SUB) for e in sub.subscriptions)
        return out
    return []


class _TtlCache:
    """name -> (fetched_at, value); concurrent misses for one name share one fetch."""

    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = ttl_seconds
        self._values: dict[str, tuple[float, Any]] = {}
        self._pending: dict[str, asyncio.Future[Any]] = {}

    async def get(self, key: str, fetch: Callable[[str], Awaitable[Any]]) -> Any:
        hit = self._values.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            value = await fetch(key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters (if any) re-raise it
            raise
        else:
            self._values[key] = (time.monotonic(), value)
            if len(self._values) > 10_000:  # userCacheMaxNum-like bound
                self._values.pop(next(iter(self._values)))
            future.set_result(value)
            return value
        finally:
            self._pending.pop(key, None)


class ProxyAuthMetadata:
    """Users and ACLs as the brokers hold them (ProxyAuthentication/AuthorizationMetadataProvider)."""

    def __init__(self, config: AuthConfig, masters: Callable[[], Awaitable[list[str]]],
                 invoke: Callable[[str, int, dict[str, str]], Awaitable[Any]]) -> None:
        self._local = {u.username: u for u in config.bootstrap_users()}
        self._masters = masters
        self._invoke = invoke
        self._users = _TtlCache(max(config.user_cache_refresh_second, 0))
        self._acls = _TtlCache(max(config.acl_cache_refresh_second, 0))

    async def user(self, username: str) -> User | None:
        local = self._local.get(username)
        if local is not None:
            return local
        return await self._users.get(username, self._fetch_user)

    async def acl(self, subject: str) -> Acl | None:
        return await self._acls.get(subject, self._fetch_acl)

    async def _fetch_user(self, username: str) -> User | None:
        obj = await self._fetch(RequestCode.AUTH_GET_USER, {"username": username})
        return None if obj is None else User.from_json(obj)

    async def _fetch_acl(self, subject: str) -> Acl | None:
        obj = await self._fetch(RequestCode.AUTH_GET_ACL, {"subject": subject})
        return None if obj is None else Acl.from_json(obj)

    async def _fetch(self, code: int, header: dict[str, str]) -> Any:
        last = "no master broker is known"
        for addr in await self._masters():
            try:
                response = await self._invoke(addr, code, header)
            except Exception as exc:  # noqa: BLE001 -- try the next master
                last = f"{addr}: {exc}"
                continue
            if response.code == ResponseCode.SUCCESS:
                return json.loads(response.body) if response.body else None
            last = f"{addr}: code {response.code} {response.remark}"
        raise AuthError(f"cannot read users/ACLs from the brokers ({last})")


class ProxyAuthChecker:
    def __init__(self, config: AuthConfig, metadata: ProxyAuthMetadata) -> None:
        self.authentication = config.authentication_enabled
        self.authorization = config.authorization_enabled
        self.max_skew_ms = config.authentication_max_clock_skew_millis
        self.authn_whitelist = whitelist(config.authentication_whitelist)
        self.authz_whitelist = whitelist(config.authorization_whitelist)
        self.metadata = metadata
        # Told the reason of every refusal (the proxy's metrics count them); None: nobody asks.
        self.on_denied: Callable[[str], None] | None = None
        # (authorization, x-mq-date-time) -> (username, verified at): a client stamps every request
        # of one second alike, so its repeats skip parsing, the clock and the HMAC. Entries live
        # no longer than a second, and never longer than the user cache (a disabled user is seen).
        self._verified: dict[tuple[str, str], tuple[str, float]] = {}
        self._verified_ttl = min(1.0, float(max(config.user_cache_refresh_second, 0)))
        # (username, requirements, source IP) -> (refusal or None, decided at), for as long as the
        # ACL cache would serve the same ACL anyway (at most a second).
        self._decided: dict[tuple[Any, ...], tuple[str | None, float]] = {}
        self._decided_ttl = min(1.0, float(max(config.acl_cache_refresh_second, 0)),
                                float(max(config.user_cache_refresh_second, 0)))

    # ---- checks -----------------------------------------------------------------------------

    async def authenticate(self, md: dict[str, str]) -> str:
        """The verified username (DefaultAuthenticationContextBuilder + handler, plus the clock)."""
        header = md.get(AUTHORIZATION)
        if not header:
            raise AuthenticationError("username cannot be null")
        stamp = md.get(DATE_TIME)
        if not stamp:
            raise AuthenticationError("datetime is null")
        key = (header, stamp)
        hit = self._verified.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[1] < self._verified_ttl:
            return hit[0]
        username = await self._authenticate(header, stamp)
        if len(self._verified) >= 10_000:
            self._verified.clear()
        self._verified[key] = (username, now)
        return username

    async def _authenticate(self, header: str, stamp: str) -> str:
        try:
            username, signature = parse_grpc_authorization(header)
        except ValueError as exc:
            raise AuthenticationError(str(exc)) from None
        if self.max_skew_ms > 0:
            try:
                skew = grpc_clock_skew_ms(stamp)
            except ValueError:
                raise AuthenticationError(f"{DATE_TIME} {stamp!r} is not yyyyMMdd'T'HHmmss'Z'") from None
            if skew > self.max_skew_ms:
                raise AuthenticationError(
                    f"{DATE_TIME} {stamp} is {skew} ms from the server clock, more than "
                    f"authenticationMaxClockSkewMillis={self.max_skew_ms}: refused as a possible replay")
        user = check_user(await self.metadata.user(username), username)
        if not verify_grpc_signature(user.password, stamp, signature):
            raise AuthenticationError(f"check signature failed for User:{username}")
        return username

    async def check(self, full_name: str, md: dict[str, str], requirements: list[Requirement],
                    peer: str) -> str | None:
        """Raise AuthError when the call may not proceed; return the caller's username."""
        try:
            return await self._check(full_name, md, requirements, peer)
        except AuthError as exc:
            if self.on_denied is not None:
                self.on_denied(denial_reason(exc))
            raise

    async def _check(self, full_name: str, md: dict[str, str], requirements: list[Requirement],
                     peer: str) -> str | None:
        username: str | None = None
        if self.authentication and full_name not in self.authn_whitelist:
            username = await self.authenticate(md)
        elif md.get(AUTHORIZATION):
            try:
                username = parse_grpc_authorization(md[AUTHORIZATION])[0]
            except ValueError:
                username = None
        if self.authorization and full_name not in self.authz_whitelist:
            await self.authorize(username, requirements, peer)
        return username

    async def authorize(self, username: str | None, requirements: list[Requirement], peer: str) -> None:
        if not requirements:
            return
        ip = _peer_ip(peer)
        key = (username, tuple(requirements), ip)
        hit = self._decided.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[1] < self._decided_ttl:
            if hit[0] is not None:
                raise AuthorizationError(hit[0])
            return
        user = await self.metadata.user(username) if username else None
        acl = await self.metadata.acl(f"User:{username}") if username and user is not None else None
        refusal: str | None = None
        try:
            decide(user, username, acl, requirements, ip)
        except AuthorizationError as exc:
            refusal = str(exc)
        if len(self._decided) >= 10_000:
            self._decided.clear()
        self._decided[key] = (refusal, now)
        if refusal is not None:
            raise AuthorizationError(refusal)

    # ---- wrapping the servicer ----------------------------------------------------------------

    def instrument(self, servicer: Any) -> Any:
        """Replace the servicer's RPC methods (on the instance) by checking wrappers, once; call
        before add_MessagingServiceServicer_to_server, which reads them.

        Why not a grpc.aio interceptor: it runs for every call and builds a new method handler
        each time, which measured as a large part of ACL 2.0's cost per message."""
        for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
            name = method.name
            behavior = getattr(servicer, name)
            if method.client_streaming:  # Telemetry, the one bidi stream
                setattr(servicer, name, self._wrap_telemetry(behavior))
                continue
            response_cls = getattr(spb, f"{name}Response", None)
            if response_cls is None:
                continue
            requirements = GRPC_REQUIREMENTS.get(name, lambda r: [])
            wrap = self._wrap_unary_stream if method.server_streaming else self._wrap_unary
            setattr(servicer, name, wrap(name, response_cls, requirements, behavior))
        return servicer

    async def _refusal(self, name: str, request: Any, context: Any,
                       requirements: Callable[[Any], list[Requirement]]) -> pb.Status | None:
        md = _metadata(context)
        try:
            await self.check(_PROTO_PACKAGE + f"{name}Request", md, requirements(request), context.peer() or "")
        except AuthError as exc:
            log.info("%s refused for %s: %s", name, context.peer(), exc)
            return status(pb.Code.UNAUTHORIZED, str(exc))
        return None

    def _wrap_unary(self, name: str, response_cls: type, requirements: Callable[[Any], list[Requirement]],
                    behavior: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapped(request: Any, context: Any) -> Any:
            refused = await self._refusal(name, request, context, requirements)
            if refused is not None:
                return response_cls(status=refused)
            return await behavior(request, context)

        return wrapped

    def _wrap_unary_stream(self, name: str, response_cls: type, requirements: Callable[[Any], list[Requirement]],
                           behavior: Callable[..., Any]) -> Callable[..., Any]:
        async def wrapped(request: Any, context: Any) -> AsyncIterator[Any]:
            refused = await self._refusal(name, request, context, requirements)
            if refused is not None:
                yield response_cls(status=refused)
                return
            async for response in behavior(request, context):
                yield response

        return wrapped

    def _wrap_telemetry(self, behavior: Callable[..., Any]) -> Callable[..., Any]:
        full_name = _PROTO_PACKAGE + "TelemetryCommand"

        async def wrapped(request_iterator: Any, context: Any) -> AsyncIterator[Any]:
            md = _metadata(context)
            peer = context.peer() or ""
            try:
                username = await self.check(full_name, md, [], peer)
            except AuthError as exc:
                log.info("Telemetry refused for %s: %s", peer, exc)
                yield spb.TelemetryCommand(status=status(pb.Code.UNAUTHORIZED, str(exc)))
                return
            refused: list[pb.Status] = []

            async def checked() -> AsyncIterator[Any]:
                async for command in request_iterator:
                    if (self.authorization and full_name not in self.authz_whitelist
                            and command.WhichOneof("command") == "settings"):
                        try:
                            await self.authorize(username, settings_requirements(command.settings), peer)
                        except AuthError as exc:
                            log.info("Telemetry settings refused for %s: %s", peer, exc)
                            refused.append(status(pb.Code.UNAUTHORIZED, str(exc)))
                            return  # ends the stream; the refusal is the last thing sent
                    yield command

            async for response in behavior(checked(), context):
                yield response
            for item in refused:
                yield spb.TelemetryCommand(status=item)

        return wrapped


def _metadata(context: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in context.invocation_metadata() or () if isinstance(v, str)}


def _peer_ip(peer: str) -> str:
    """grpc's "ipv4:1.2.3.4:5678" / "ipv6:[::1]:5678" -> the IP alone."""
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            peer = peer[len(prefix):]
            break
    host, sep, _port = peer.rpartition(":")
    return (host if sep else peer).strip("[]")


def new_proxy_auth_checker(config: AuthConfig, cluster: Any, api: Any) -> ProxyAuthChecker:
    """The checker for a ProxyServer: users/ACLs come from the cluster's masters via ``api``."""
    async def masters() -> list[str]:
        return [bd.master_addr for bd in await cluster.all_masters()]

    async def invoke(addr: str, code: int, header: dict[str, str]) -> Any:
        return await api.invoke(addr, code, header)

    return ProxyAuthChecker(config, ProxyAuthMetadata(config, masters, invoke))
