"""What each gRPC request needs under ACL 2.0 (DefaultAuthorizationContextBuilder), and the checker's caches."""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.auth.config import AuthConfig
from orbitmq.auth.model import Action, AuthenticationError, AuthorizationError, Resource, User
from orbitmq.auth.signature import grpc_auth_headers
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.auth import (
    GRPC_REQUIREMENTS,
    ProxyAuthChecker,
    ProxyAuthMetadata,
    settings_requirements,
)

PUB, SUB = (Action.Pub,), (Action.Sub,)
T, G = pb.Resource(name="t"), pb.Resource(name="g")
MQ = pb.MessageQueue(topic=T)


@pytest.mark.parametrize(("name", "request_", "expected"), [
    ("SendMessage", spb.SendMessageRequest(messages=[pb.Message(topic=T)]), [(Resource.topic("t"), PUB)]),
    ("SendMessage", spb.SendMessageRequest(), []),
    ("QueryRoute", spb.QueryRouteRequest(topic=T), [(Resource.topic("t"), (Action.Pub, Action.Sub))]),
    ("EndTransaction", spb.EndTransactionRequest(topic=T), [(Resource.topic("t"), PUB)]),
    ("Heartbeat", spb.HeartbeatRequest(group=G, client_type=pb.SIMPLE_CONSUMER), [(Resource.group("g"), SUB)]),
    ("Heartbeat", spb.HeartbeatRequest(client_type=pb.PRODUCER), []),
    ("ReceiveMessage", spb.ReceiveMessageRequest(group=G, message_queue=MQ),
     [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]),
    ("AckMessage", spb.AckMessageRequest(group=G, topic=T), [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]),
    ("ForwardMessageToDeadLetterQueue", spb.ForwardMessageToDeadLetterQueueRequest(group=G, topic=T),
     [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]),
    ("QueryAssignment", spb.QueryAssignmentRequest(group=G, topic=T),
     [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]),
    ("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(group=G, topic=T), [(Resource.group("g"), SUB)]),
    ("NotifyClientTermination", spb.NotifyClientTerminationRequest(), []),
    ("PullMessage", spb.PullMessageRequest(group=G, message_queue=MQ),
     [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]),
    ("QueryOffset", spb.QueryOffsetRequest(message_queue=MQ), [(Resource.topic("t"), SUB)]),
])
def test_grpc_requirements(name: str, request_: object, expected: list) -> None:
    assert GRPC_REQUIREMENTS[name](request_) == expected


def test_settings_requirements() -> None:
    pub = pb.Settings(publishing=pb.Publishing(topics=[T, pb.Resource(name="u")]))
    assert settings_requirements(pub) == [(Resource.topic("t"), PUB), (Resource.topic("u"), PUB)]
    sub = pb.Settings(subscription=pb.Subscription(group=G, subscriptions=[pb.SubscriptionEntry(topic=T)]))
    assert settings_requirements(sub) == [(Resource.group("g"), SUB), (Resource.topic("t"), SUB)]
    assert settings_requirements(pb.Settings()) == []


class _Meta(ProxyAuthMetadata):
    def __init__(self, config: AuthConfig) -> None:
        super().__init__(config, None, None)  # type: ignore[arg-type]
        self.users = {"bob": User("bob", "pw")}
        self.lookups = 0

    async def user(self, username: str) -> User | None:
        self.lookups += 1
        return self.users.get(username)

    async def acl(self, subject: str) -> None:
        return None


def test_verified_headers_are_cached_briefly_and_refusals_repeat() -> None:
    config = AuthConfig(authentication_enabled=True, authorization_enabled=True)
    meta = _Meta(config)
    checker = ProxyAuthChecker(config, meta)
    md = dict(grpc_auth_headers("bob", "pw"))

    async def go() -> None:
        assert await checker.authenticate(md) == "bob"
        assert await checker.authenticate(md) == "bob"
        assert meta.lookups == 1  # the second call hit the cache
        with pytest.raises(AuthenticationError):
            await checker.authenticate(dict(grpc_auth_headers("bob", "bad")))
        for _ in range(2):  # a cached refusal is still a refusal, with its message
            with pytest.raises(AuthorizationError, match="no matched policies"):
                await checker.authorize("bob", [(Resource.topic("t"), PUB)], "ipv4:10.0.0.1:5")

    asyncio.run(go())
