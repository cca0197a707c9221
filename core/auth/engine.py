"""Authentication and authorization decisions, shared by every server.

``decide`` implements AclAuthorizationHandler's ACL evaluation with one deliberate change: when
two matching entries are equally specific, **Deny wins** (upstream's comparator lets Allow win).
``remoting_requirements`` is DefaultAuthorizationContextBuilder's (resource, actions) table for
Remoting request codes.
``RemotingAuthGuard`` is the synchronous check run before a Remoting processor.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from orbitmq.auth.config import AuthConfig, whitelist
from orbitmq.auth.model import (
    RETRY_PREFIX,
    Acl,
    Action,
    AuthenticationError,
    AuthError,
    AuthorizationError,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
    denial_reason,
)
from orbitmq.auth.signature import ACCESS_KEY, verify_remoting_signature

log = logging.getLogger("orbitmq.auth")

Requirement = tuple[Resource, tuple[Action, ...]]
V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal()
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"

_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _rank(entry: PolicyEntry) -> tuple[int, int, int, int]:
    """Smaller is more specific: typed before Any, LITERAL < PREFIXED < ANY, longer prefix, Deny."""
    res = entry.resource
    return (1 if res.type == ResourceType.Any else 0, _PATTERN_RANK[res.pattern], -len(res.name),
            0 if entry.decision == Decision.Deny else 1)


def matching_entry(acl: Acl | None, resource: Resource, actions: tuple[Action, ...],
                   source_ip: str) -> PolicyEntry | None:
    """The entry that decides: Custom policy entries first, Default only when no Custom one matches."""
    if acl is None:
        return None
    for policy_type in (PolicyType.Custom, PolicyType.Default):
        policy = acl.policy(policy_type)
        if policy is None:
            continue
        matches = [e for e in policy.entries
                   if e.resource.matches(resource) and e.covers_action(actions) and e.covers_ip(source_ip)]
        if matches:
            return min(matches, key=_rank)
    return None


def _action_text(actions: tuple[Action, ...]) -> str:
    return "/".join(a.name for a in actions)


def check_user(user: User | None, username: str) -> User:
    """The user must exist and be enabled (DefaultAuthenticationHandler)."""
    if user is None:
        raise AuthenticationError(f"User:{username} is not found")
    if user.user_status == UserStatus.disable:
        raise AuthenticationError(f"User:{username} is disabled")
    return user


def decide(user: User | None, username: str | None, acl: Acl | None, requirements: list[Requirement],
           source_ip: str) -> None:
    """Raise AuthorizationError unless every requirement is allowed for this user."""
    if not requirements:
        return
    if not username:
        first = requirements[0]
        raise AuthorizationError(f"anonymous has no permission to access {first[0].key} from {source_ip}, "
                                 f"action {_action_text(first[1])}: no user given")
    if user is None:
        raise AuthorizationError(f"User:{username} not found")
    if user.user_type == UserType.Super:
        return
    for resource, actions in requirements:
        entry = matching_entry(acl, resource, actions, source_ip)
        if entry is None:
            detail = "no matched policies"
        elif entry.decision == Decision.Deny:
            detail = f"the decision is Deny by {entry.resource.key}"
        else:
            continue
        raise AuthorizationError(f"User:{username} has no permission to access {resource.key} from {source_ip}, "
                                 f"action {_action_text(actions)}: {detail}")


# ---- Remoting request codes -> what they need ---------------------------------------------------

PUB = (Action.Pub,)
SUB = (Action.Sub,)
GET = (Action.Get,)


def _topic_group(ext: dict[str, str], actions: tuple[Action, ...], topic_key: str = "topic",
                 group_key: str = "consumerGroup") -> list[Requirement]:
    out: list[Requirement] = []
    topic = ext.get(topic_key)
    if topic:
        out.append((Resource.group(topic) if topic.startswith(RETRY_PREFIX) else Resource.topic(topic), actions))
    group = ext.get(group_key)
    if group:
        out.append((Resource.group(group), actions))
    return out


def _send(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    topic = ext.get("topic", ext.get("b", ""))
    if topic.startswith(RETRY_PREFIX):
        return [(Resource.group(topic), SUB)]
    return [(Resource.topic(topic), PUB)]


def _heartbeat(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    out: list[Requirement] = []
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return out
    # the body is the client's JSON: anything not shaped like HeartbeatData names no resource
    # (fuzz finding: AttributeError on a list or a number where an object belongs)
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers if isinstance(consumers, list) else ():
        if not isinstance(consumer, dict):
            continue
        group = consumer.get("groupName")
        if group and isinstance(group, str):
            out.append((Resource.group(group), SUB))
        subs = consumer.get("subscriptionDataSet")
        for sub in subs if isinstance(subs, list) else ():
            topic = sub.get("topic") if isinstance(sub, dict) else None
            if topic and isinstance(topic, str) and not topic.startswith(RETRY_PREFIX):
                out.append((Resource.topic(topic), SUB))
    return out


def _body_group(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return []
    if not isinstance(data, dict):  # fuzz finding: AttributeError on a JSON array or number
        return []
    group = data.get("consumerGroup") or data.get("groupName")
    if not isinstance(group, str):
        return []
    return [(Resource.group(group), SUB)] if group else []


def _fields(actions: tuple[Action, ...], topic_key: str | None = "topic",
            group_key: str | None = "consumerGroup") -> Callable[[dict[str, str], bytes, str], list[Requirement]]:
    def build(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
        return _topic_group(ext, actions, topic_key or "\0", group_key or "\0")
    return build


def _cluster(actions: tuple[Action, ...]) -> Callable[[dict[str, str], bytes, str], list[Requirement]]:
    def build(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
        return [(Resource.cluster(cluster), actions)]
    return build


def _topic_create(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    return [(Resource.topic(ext.get("topic", "")), (Action.Create, Action.Update))]


def _group_create(ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        data = {}
    group = data.get("groupName", "") if isinstance(data, dict) else ""
    if not isinstance(group, str):
        group = ""
    return [(Resource.group(group), (Action.Create, Action.Update))]


_Builder = Callable[[dict[str, str], bytes, str], list[Requirement]]
_UPDATE = (Action.Update,)

REMOTING_REQUIREMENTS: dict[int, _Builder | None] = {
    10: _send, 310: _send, 320: _send,                                   # SEND_MESSAGE(_V2), SEND_BATCH
    324: _send, 325: _send, 370: _fields(PUB, "topic", None),            # SEND_REPLY_MESSAGE(_V2), RECALL
    11: _fields(SUB), 361: _fields(SUB),                                 # PULL_MESSAGE, LITE_PULL
    200050: _fields(SUB), 200051: _fields(SUB), 200052: _fields(SUB),    # POP, ACK, PEEK
    200053: _fields(SUB), 200054: _fields(SUB), 200055: _fields(SUB),    # CHANGE_INVISIBLE, NOTIFICATION, POLLING
    200151: None,                                                        # BATCH_ACK: per-ack topics in the body
    14: _fields((Action.Sub, Action.Get)), 15: _fields((Action.Sub, Action.Update)),
    34: _heartbeat, 41: _body_group, 42: _body_group,                    # HEART_BEAT, LOCK/UNLOCK_BATCH_MQ
    # GET_CONSUMER_LIST_BY_GROUP: Sub or Get, as DefaultAuthorizationContextBuilder (a consumer rebalances)
    35: _fields(SUB, None, "consumerGroup"), 38: _fields((Action.Sub, Action.Get), None, "consumerGroup"),
    36: _fields(SUB, "originTopic", "group"),                            # CONSUMER_SEND_MSG_BACK
    37: _fields(PUB, "topic", None),                                     # END_TRANSACTION
    323: _fields(_UPDATE, "topic", None),                                # RESUME_CHECK_HALF_MESSAGE
    321: _fields(GET),                                                   # QUERY_CONSUME_QUEUE (queryCq)
    46: _fields(SUB, None, "group"),                                     # CHECK_CLIENT_CONFIG
    105: _fields((Action.Pub, Action.Sub, Action.Get), "topic", None),   # GET_ROUTEINFO_BY_TOPIC
    12: _fields((Action.Sub, Action.Get), "topic", None),                # QUERY_MESSAGE: Sub or Get
    29: _fields(GET, "topic", None),                                     # SEARCH_OFFSET
    30: _fields(GET, "topic", None), 31: _fields(GET, "topic", None), 32: _fields(GET, "topic", None),
    33: _cluster(GET),                                                   # VIEW_MESSAGE_BY_ID
    17: _topic_create, 200: _group_create,
    215: _fields((Action.Delete,), "topic", None), 216: _fields((Action.Delete,), "topic", None),
    207: _fields((Action.Delete,), None, "groupName"),
    3001: _cluster(_UPDATE), 3002: _cluster(_UPDATE), 3003: _cluster(_UPDATE),
    3004: _cluster(GET), 3005: _cluster(GET),
    3006: _cluster(_UPDATE), 3007: _cluster(_UPDATE), 3008: _cluster(_UPDATE),
    3009: _cluster(GET), 3010: _cluster(GET),
}
# Everything else (broker/cluster administration, replication, registration) needs Update on the
# cluster: only Super users and explicit cluster administrators.
_DEFAULT = _cluster(_UPDATE)


def remoting_requirements(code: int, ext: dict[str, str], body: bytes, cluster: str) -> list[Requirement]:
    builder = REMOTING_REQUIREMENTS.get(code, _DEFAULT)
    return [] if builder is None else builder(ext, body, cluster)


class RemotingAuthGuard:
    """Authenticates (AccessKey/Signature) and authorizes one Remoting request, synchronously.

    ``users``/``acls`` look up the server's metadata (in memory on a broker; the config's
    bootstrap users on a NameServer or controller, which hold no ACLs).
    """

    def __init__(self, config: AuthConfig, cluster: str, users: Callable[[str], User | None],
                 acls: Callable[[str], Acl | None] | None) -> None:
        self.authentication = config.authentication_enabled
        self.authorization = config.authorization_enabled and acls is not None
        self.authn_whitelist = whitelist(config.authentication_whitelist)
        self.authz_whitelist = whitelist(config.authorization_whitelist)
        self.cluster = cluster
        self._users = users
        self._acls = acls
        # Told the reason of every refusal (the broker's metrics count them); None: nobody asks.
        self.on_denied: Callable[[str], None] | None = None

    def check(self, code: int, ext: dict[str, str], body: bytes, remote_address: str,
              version: int = V4_9_3 + 1) -> None:
        """Raise AuthError (NO_PERMISSION) when the request may not run."""
        username = ext.get(ACCESS_KEY) or ""
        user: User | None = None
        code_text = str(code)
        if self.authentication and code_text not in self.authn_whitelist:
            if not username:
                raise AuthenticationError("username cannot be null")
            user = check_user(self._users(username), username)
            signed = ext
            if version <= V4_9_3 and UNIQUE_MSG_QUERY_FLAG in ext:
                # clients up to 4.9.3 add this field after signing (upstream leaves it out too)
                signed = {k: v for k, v in ext.items() if k != UNIQUE_MSG_QUERY_FLAG}
            if not verify_remoting_signature(user.password, signed, body):
                raise AuthenticationError(f"check signature failed for User:{username}")
        if self.authorization and code_text not in self.authz_whitelist:
            if user is None and username:
                user = self._users(username)
            requirements = remoting_requirements(code, ext, body, self.cluster)
            acl = self._acls(f"User:{username}") if (username and self._acls is not None) else None
            decide(user, username, acl, requirements, _host_of(remote_address))


def _host_of(address: str) -> str:
    """"1.2.3.4:5678" / "[::1]:5678" -> the IP alone."""
    host, sep, _port = address.rpartition(":")
    if not sep:
        return address
    return host.strip("[]")


def guard_processor(guard: RemotingAuthGuard, processor: Any) -> Any:
    """Wrap a Remoting processor: refused requests get NO_PERMISSION and never reach it."""
    async def guarded(request: Any, channel: Any) -> Any:
        try:
            guard.check(request.code, request.ext_fields, request.body, channel.remote_address, request.version)
        except AuthError as exc:
            log.info("refused code=%s from %s: %s", request.code, channel.remote_address, exc)
            if guard.on_denied is not None:
                guard.on_denied(denial_reason(exc))
            return request.response_to(exc.code, str(exc))
        return await processor(request, channel)

    return guarded


def install_bootstrap_guard(server: Any, config: AuthConfig) -> None:
    """NameServer/controller: authenticate against the Super users of their own config.

    They hold no user or ACL tables (those live on the brokers), so only the init user and the
    inner client credentials sign in; other callers need ``authenticationWhitelist`` (and, with
    authorization on, ``authorizationWhitelist``) entries for the codes they use.
    """
    config.validate_auth()
    if not config.auth_enabled:
        return
    users = {u.username: u for u in config.bootstrap_users()}
    # Every user known here is Super; with authorizationEnabled an anonymous caller (one let past
    # authentication by authenticationWhitelist) is refused unless authorizationWhitelist names the code.
    guard = RemotingAuthGuard(config, "", users.get, lambda subject: None)
    server.set_guard(lambda processor: guard_processor(guard, processor))
