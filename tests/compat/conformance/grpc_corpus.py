"""The gRPC requests both proxies get: every apache.rocketmq.v2.MessagingService RPC, its good
request and its bad variants.

Both sides are set up alike first (``grpc_run.py``): a NameServer, a broker ``broker-a``
(autoCreateTopicEnable and autoCreateSubscriptionGroup off, recall on) and a proxy in front of
them; topics ``GConfTopic`` (NORMAL, 4 queues, 8 messages in queue 0 tagged ``conf``),
``GConfFifoTopic`` (FIFO), ``GConfTxTopic`` (TRANSACTION), ``GConfDelayTopic`` (DELAY), groups
``GConfGroup`` and ``GConfFifoGroup`` (orderly). Three clients open a Telemetry stream with their
Settings before the first case and keep it open (as every official client does; Apache's proxy
answers a consumer's ReceiveMessage from a client without Settings with INTERNAL_SERVER_ERROR):
:data:`PRODUCER` publishing the four topics, :data:`CONSUMER` a simple consumer of GConfGroup
on GConfTopic, :data:`FIFO` one of GConfFifoGroup on GConfFifoTopic. :data:`STRANGER` never
sends Settings; :data:`NO_CLIENT` sends no x-mq-client-id.

A case's request is built per side from the side's :class:`State` (its proxy's address, and what
earlier cases kept: a received message's receipt handle, a transaction's id, a recall handle):
cases run in order, and a later one may use what an earlier one got.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common.message_id import create_uniq_id
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Duration, Timestamp
from tests.compat.conformance.grpc_compare import Answer, kind

BROKER = "broker-a"
TOPIC, FIFO_TOPIC, TX_TOPIC, DELAY_TOPIC = "GConfTopic", "GConfFifoTopic", "GConfTxTopic", "GConfDelayTopic"
GROUP, FIFO_GROUP = "GConfGroup", "GConfFifoGroup"
MISSING_TOPIC, MISSING_GROUP = "GConfNoSuchTopic", "GConfNoSuchGroup"
TOPICS = {TOPIC: "NORMAL", FIFO_TOPIC: "FIFO", TX_TOPIC: "TRANSACTION", DELAY_TOPIC: "DELAY"}
MESSAGES = 8  # preloaded in queue 0 of TOPIC
PRODUCER, CONSUMER, FIFO = "gconf-producer", "gconf-consumer", "gconf-fifo-consumer"
STRANGER, NO_CLIENT = "gconf-stranger", ""
MAX_BODY = 4 * 1024 * 1024  # both proxies' default maxMessageSize


@dataclass
class State:
    """One side as the cases see it: its proxy and what earlier cases kept."""

    kind: str  # "apache" | "orbitmq"
    proxy: str  # gRPC "host:port"
    kept: dict[str, Any] = field(default_factory=dict)

    def endpoints(self) -> pb.Endpoints:
        host, port = self.proxy.rsplit(":", 1)
        return pb.Endpoints(scheme=pb.AddressScheme.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    def message(self, key: str, index: int = 0) -> pb.Message:
        """A message an earlier case kept; KeyError/IndexError (the case is then not sent) if none."""
        return self.kept[key][index]


@dataclass(frozen=True)
class GCase:
    name: str
    rpc: str  # MessagingService's method
    request: Callable[[State], Any]  # the request; for Telemetry, the list of commands to send
    client: str = PRODUCER  # the x-mq-client-id sent ("" for none)
    # Structure compared this many message levels deep.
    depth: int = 6
    # Paths (grpc_compare.pick) whose values must be equal too.
    values: tuple[str, ...] = ()
    # Keeps what later cases use from this side's answer.
    keep: Callable[[State, Answer], None] | None = None
    # Compare how many alike responses a stream has (False: only that it has some).
    count: bool = True
    timeout: float = 10.0


# ---- request builders --------------------------------------------------------------------------

def res(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


def timestamp(ms: int) -> Timestamp:
    t = Timestamp()
    t.FromMilliseconds(ms)
    return t


def now_ms() -> int:
    return int(time.time() * 1000)


def message(topic: str = TOPIC, body: bytes = b"gconf", *, tag: str | None = "gconf", keys: tuple[str, ...] = ("k1",),
            props: dict[str, str] | None = None, group: str | None = None, message_type: int = pb.MessageType.NORMAL,
            message_id: str | None = None, delivery_ms: int | None = None,
            recovery_ms: int | None = None) -> pb.Message:
    sysp = pb.SystemProperties(message_id=create_uniq_id() if message_id is None else message_id,
                               message_type=message_type, body_encoding=pb.Encoding.IDENTITY,
                               born_timestamp=timestamp(now_ms()), born_host="127.0.0.1")
    if tag is not None:
        sysp.tag = tag
    sysp.keys.extend(keys)
    if group is not None:
        sysp.message_group = group
    if delivery_ms is not None:
        sysp.delivery_timestamp.CopyFrom(timestamp(now_ms() + delivery_ms))
    if recovery_ms is not None:
        sysp.orphaned_transaction_recovery_duration.CopyFrom(duration(recovery_ms))
    return pb.Message(topic=res(topic), body=body, user_properties=props or {}, system_properties=sysp)


def send(*messages: pb.Message) -> Callable[[State], spb.SendMessageRequest]:
    return lambda s: spb.SendMessageRequest(messages=list(messages))


def route(topic: str, endpoints: bool = True) -> Callable[[State], spb.QueryRouteRequest]:
    return lambda s: spb.QueryRouteRequest(topic=res(topic), endpoints=s.endpoints() if endpoints else None)


def assignment(topic: str, group: str) -> Callable[[State], spb.QueryAssignmentRequest]:
    return lambda s: spb.QueryAssignmentRequest(topic=res(topic), group=res(group), endpoints=s.endpoints())


def receive(topic: str = TOPIC, group: str = GROUP, *, batch: int = 4, invisible_ms: int | None = 30_000,
            polling_ms: int = 1_000, expression: str = "*", filter_type: int = pb.FilterType.TAG,
            auto_renew: bool = False) -> Callable[[State], spb.ReceiveMessageRequest]:
    def build(s: State) -> spb.ReceiveMessageRequest:
        request = spb.ReceiveMessageRequest(
            group=res(group), message_queue=pb.MessageQueue(topic=res(topic), id=-1, broker=pb.Broker(name=BROKER)),
            filter_expression=pb.FilterExpression(type=filter_type, expression=expression), batch_size=batch,
            long_polling_timeout=duration(polling_ms), auto_renew=auto_renew)
        if invisible_ms is not None:
            request.invisible_duration.CopyFrom(duration(invisible_ms))
        return request
    return build


def keep_messages(key: str) -> Callable[[State, Answer], None]:
    def keep(s: State, answer: Answer) -> None:
        s.kept[key] = [r.message for r in answer.responses if kind(r) == "message"]
    return keep


def keep_send(key: str) -> Callable[[State, Answer], None]:
    def keep(s: State, answer: Answer) -> None:
        if answer.responses and answer.responses[0].entries:
            s.kept[key] = answer.responses[0].entries[0]
    return keep


def ack(key: str, index: int, *, group: str = GROUP, topic: str = TOPIC,
        handle: str | None = None) -> Callable[[State], spb.AckMessageRequest]:
    def build(s: State) -> spb.AckMessageRequest:
        m = s.message(key, index)
        entry = spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                    receipt_handle=m.system_properties.receipt_handle if handle is None else handle)
        return spb.AckMessageRequest(group=res(group), topic=res(topic), entries=[entry])
    return build


def change(key: str, index: int, invisible_ms: int = 30_000, *, group: str = GROUP,
           handle: str | None = None) -> Callable[[State], spb.ChangeInvisibleDurationRequest]:
    def build(s: State) -> spb.ChangeInvisibleDurationRequest:
        m = s.message(key, index)
        return spb.ChangeInvisibleDurationRequest(
            group=res(group), topic=res(TOPIC), message_id=m.system_properties.message_id,
            receipt_handle=m.system_properties.receipt_handle if handle is None else handle,
            invisible_duration=duration(invisible_ms))
    return build


def forward(key: str, index: int, *, group: str = GROUP,
            handle: str | None = None) -> Callable[[State], spb.ForwardMessageToDeadLetterQueueRequest]:
    def build(s: State) -> spb.ForwardMessageToDeadLetterQueueRequest:
        m = s.message(key, index)
        return spb.ForwardMessageToDeadLetterQueueRequest(
            group=res(group), topic=res(TOPIC), message_id=m.system_properties.message_id,
            receipt_handle=m.system_properties.receipt_handle if handle is None else handle,
            delivery_attempt=1, max_delivery_attempts=16)
    return build


def end_transaction(resolution: int = pb.TransactionResolution.COMMIT, *, transaction_id: str | None = None,
                    message_id: str | None = None, key: str = "tx") -> Callable[[State], spb.EndTransactionRequest]:
    def build(s: State) -> spb.EndTransactionRequest:
        sent = s.kept[key]
        tid = transaction_id if transaction_id is not None else sent.transaction_id  # type: ignore[union-attr]
        mid = message_id if message_id is not None else sent.message_id  # type: ignore[union-attr]
        return spb.EndTransactionRequest(topic=res(TX_TOPIC), message_id=mid, transaction_id=tid,
                                         resolution=resolution, source=pb.TransactionSource.SOURCE_CLIENT)
    return build


def recall(topic: str = DELAY_TOPIC, handle: str | None = None) -> Callable[[State], spb.RecallMessageRequest]:
    def build(s: State) -> spb.RecallMessageRequest:
        h = handle if handle is not None else s.kept["delay"].recall_handle
        return spb.RecallMessageRequest(topic=res(topic), recall_handle=h)
    return build


def queue(topic: str = TOPIC, queue_id: int = 0) -> pb.MessageQueue:
    return pb.MessageQueue(topic=res(topic), id=queue_id, broker=pb.Broker(name=BROKER))


def publishing(*topics: str) -> pb.Settings:
    return pb.Settings(client_type=pb.ClientType.PRODUCER, request_timeout=duration(3_000),
                       publishing=pb.Publishing(topics=[res(t) for t in topics]),
                       user_agent=pb.UA(language=pb.Language.PYTHON, version="5.0.0", platform="linux",
                                        hostname="gconf"))


def subscription(group: str, topic: str, client_type: int = pb.ClientType.SIMPLE_CONSUMER) -> pb.Settings:
    entry = pb.SubscriptionEntry(topic=res(topic), expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                                  expression="*"))
    return pb.Settings(client_type=client_type, request_timeout=duration(3_000),
                       subscription=pb.Subscription(group=res(group), subscriptions=[entry]),
                       user_agent=pb.UA(language=pb.Language.PYTHON, version="5.0.0", platform="linux",
                                        hostname="gconf"))


# The Settings each session client sends first (grpc_run keeps its stream open).
SESSIONS: dict[str, pb.Settings] = {
    PRODUCER: publishing(*TOPICS),
    CONSUMER: subscription(GROUP, TOPIC),
    FIFO: subscription(FIFO_GROUP, FIFO_TOPIC),
}


def telemetry(*commands: spb.TelemetryCommand) -> Callable[[State], list[spb.TelemetryCommand]]:
    return lambda s: list(commands)


# ---- the corpus ----------------------------------------------------------------------------------

ROUTE_CASES = [
    GCase("route", "QueryRoute", route(TOPIC),
          values=("message_queues#", "message_queues[*].id", "message_queues[*].broker.name")),
    GCase("route of a FIFO topic", "QueryRoute", route(FIFO_TOPIC), values=("message_queues#",)),
    GCase("route of a TRANSACTION topic", "QueryRoute", route(TX_TOPIC), values=("message_queues#",)),
    GCase("route of a DELAY topic", "QueryRoute", route(DELAY_TOPIC), values=("message_queues#",)),
    GCase("route of a missing topic", "QueryRoute", route(MISSING_TOPIC)),
    GCase("route of an empty topic name", "QueryRoute", route("")),
    GCase("route of an illegal topic name", "QueryRoute", route("bad topic!")),
    GCase("route of a system topic", "QueryRoute", route("SCHEDULE_TOPIC_XXXX")),
    GCase("route without endpoints", "QueryRoute", route(TOPIC, endpoints=False)),
    GCase("route without a client id", "QueryRoute", route(TOPIC), client=NO_CLIENT),
    GCase("assignment", "QueryAssignment", assignment(TOPIC, GROUP),
          values=("assignments#", "assignments[*].message_queue.id")),
    GCase("assignment of an orderly group", "QueryAssignment", assignment(FIFO_TOPIC, FIFO_GROUP),
          client=FIFO, values=("assignments#",)),
    GCase("assignment of a missing topic", "QueryAssignment", assignment(MISSING_TOPIC, GROUP), client=CONSUMER),
    GCase("assignment of a missing group", "QueryAssignment", assignment(TOPIC, MISSING_GROUP), client=CONSUMER),
    GCase("assignment with an empty group", "QueryAssignment", assignment(TOPIC, ""), client=CONSUMER),
    GCase("assignment with an illegal group name", "QueryAssignment", assignment(TOPIC, "bad group!"),
          client=CONSUMER),
]

CLIENT_CASES = [
    GCase("heartbeat of a producer", "Heartbeat",
          lambda s: spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)),
    GCase("heartbeat of a consumer", "Heartbeat",
          lambda s: spb.HeartbeatRequest(group=res(GROUP), client_type=pb.ClientType.SIMPLE_CONSUMER),
          client=CONSUMER),
    GCase("heartbeat of a consumer without its group", "Heartbeat",
          lambda s: spb.HeartbeatRequest(client_type=pb.ClientType.SIMPLE_CONSUMER), client=CONSUMER),
    GCase("heartbeat of a client that sent no settings", "Heartbeat",
          lambda s: spb.HeartbeatRequest(group=res(GROUP), client_type=pb.ClientType.SIMPLE_CONSUMER),
          client=STRANGER),
    GCase("heartbeat without a client id", "Heartbeat",
          lambda s: spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), client=NO_CLIENT),
    GCase("telemetry: producer settings", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=publishing(TOPIC))), client="gconf-tel-producer"),
    GCase("telemetry: simple consumer settings", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=subscription(GROUP, TOPIC))), client="gconf-tel-simple"),
    GCase("telemetry: push consumer settings of an orderly group", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=subscription(FIFO_GROUP, FIFO_TOPIC, pb.ClientType.PUSH_CONSUMER))),
          client="gconf-tel-push"),
    GCase("telemetry: settings sent twice on one stream", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=publishing(TOPIC)),
                    spb.TelemetryCommand(settings=publishing(TOPIC, FIFO_TOPIC))), client="gconf-tel-twice"),
    GCase("telemetry: producer settings of a missing topic", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=publishing(MISSING_TOPIC))), client="gconf-tel-missing"),
    GCase("telemetry: consumer settings of a missing group", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=subscription(MISSING_GROUP, TOPIC))),
          client="gconf-tel-missing-group"),
    GCase("telemetry: settings without a client type", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=pb.Settings(publishing=pb.Publishing(topics=[res(TOPIC)])))),
          client="gconf-tel-untyped"),
    GCase("telemetry: a command without content", "Telemetry", telemetry(spb.TelemetryCommand()),
          client="gconf-tel-empty", timeout=3),
    GCase("telemetry without a client id", "Telemetry",
          telemetry(spb.TelemetryCommand(settings=publishing(TOPIC))), client=NO_CLIENT, timeout=3),
]

SEND_CASES = [
    GCase("send", "SendMessage", send(message()), values=("entries#",)),
    GCase("send two messages", "SendMessage", send(message(), message(keys=("k2",))), values=("entries#",)),
    GCase("send a FIFO message", "SendMessage",
          send(message(FIFO_TOPIC, message_type=pb.MessageType.FIFO, group="gconf-group-1"))),
    GCase("send a delay message", "SendMessage",
          send(message(DELAY_TOPIC, message_type=pb.MessageType.DELAY, delivery_ms=60_000)), keep=keep_send("delay")),
    GCase("send a transaction message", "SendMessage",
          send(message(TX_TOPIC, message_type=pb.MessageType.TRANSACTION, recovery_ms=60_000)), keep=keep_send("tx")),
    GCase("send another transaction message", "SendMessage",
          send(message(TX_TOPIC, message_type=pb.MessageType.TRANSACTION, recovery_ms=60_000)), keep=keep_send("tx2")),
    GCase("send a third transaction message", "SendMessage",
          send(message(TX_TOPIC, message_type=pb.MessageType.TRANSACTION, recovery_ms=60_000)), keep=keep_send("tx3")),
    GCase("send nothing", "SendMessage", send()),
    GCase("send to a missing topic", "SendMessage", send(message(MISSING_TOPIC))),
    GCase("send to an empty topic name", "SendMessage", send(message(""))),
    GCase("send to an illegal topic name", "SendMessage", send(message("bad topic!"))),
    GCase("send to a system topic", "SendMessage", send(message("SCHEDULE_TOPIC_XXXX"))),
    GCase("send to two topics at once", "SendMessage", send(message(), message(DELAY_TOPIC))),
    GCase("send an empty body", "SendMessage", send(message(body=b""))),
    GCase("send an oversized body", "SendMessage", send(message(body=b"x" * (MAX_BODY + 1))), timeout=20),
    GCase("send an oversized property", "SendMessage", send(message(props={"big": "v" * (16 * 1024 + 1)}))),
    GCase("send too many properties", "SendMessage", send(message(props={f"p{i}": "v" for i in range(129)}))),
    GCase("send a reserved property name", "SendMessage", send(message(props={"UNIQ_KEY": "x"}))),
    GCase("send an empty message id", "SendMessage", send(message(message_id=""))),
    GCase("send an illegal tag", "SendMessage", send(message(tag="a|b"))),
    GCase("send a blank tag", "SendMessage", send(message(tag=" "))),
    GCase("send a blank key", "SendMessage", send(message(keys=(" ",)))),
    GCase("send a NORMAL message to a FIFO topic", "SendMessage", send(message(FIFO_TOPIC))),
    GCase("send a FIFO message to a NORMAL topic", "SendMessage",
          send(message(TOPIC, message_type=pb.MessageType.FIFO, group="gconf-group-1"))),
    GCase("send a TRANSACTION message to a NORMAL topic", "SendMessage",
          send(message(TOPIC, message_type=pb.MessageType.TRANSACTION))),
    GCase("send a DELAY message without its delivery time", "SendMessage",
          send(message(DELAY_TOPIC, message_type=pb.MessageType.DELAY))),
    GCase("send a delay message beyond the maximum delay", "SendMessage",
          send(message(DELAY_TOPIC, message_type=pb.MessageType.DELAY, delivery_ms=4 * 86_400_000))),
    GCase("send a FIFO message with an oversized message group", "SendMessage",
          send(message(FIFO_TOPIC, message_type=pb.MessageType.FIFO, group="g" * 65))),
    GCase("send without a client id", "SendMessage", send(message()), client=NO_CLIENT),
]

CONSUME_CASES = [
    GCase("receive", "ReceiveMessage", receive(), client=CONSUMER, keep=keep_messages("received"), timeout=15),
    GCase("receive of a FIFO group", "ReceiveMessage", receive(FIFO_TOPIC, FIFO_GROUP, polling_ms=3_000),
          client=FIFO, keep=keep_messages("fifo"), timeout=15),
    GCase("receive with auto renew", "ReceiveMessage", receive(batch=1, invisible_ms=None, auto_renew=True),
          client=CONSUMER, keep=keep_messages("renewed"), timeout=15),
    # Skips (and so consumes) what is left in the topic for the group: after the receives that take messages.
    GCase("receive with a tag nothing matches", "ReceiveMessage", receive(expression="nomatch"), client=CONSUMER,
          timeout=15),
    GCase("receive of a FIFO topic for a group that is not orderly", "ReceiveMessage",
          receive(FIFO_TOPIC, GROUP, expression="nomatch"), client=CONSUMER, timeout=15),
    GCase("receive from a missing topic", "ReceiveMessage", receive(MISSING_TOPIC), client=CONSUMER),
    GCase("receive for a missing group", "ReceiveMessage", receive(group=MISSING_GROUP), client=CONSUMER),
    GCase("receive for an empty group", "ReceiveMessage", receive(group=""), client=CONSUMER),
    GCase("receive for an illegal group name", "ReceiveMessage", receive(group="bad group!"), client=CONSUMER),
    GCase("receive with an invisible duration too short", "ReceiveMessage", receive(invisible_ms=100),
          client=CONSUMER),
    GCase("receive with an invisible duration too long", "ReceiveMessage", receive(invisible_ms=13 * 3_600_000),
          client=CONSUMER),
    GCase("receive without an invisible duration", "ReceiveMessage", receive(invisible_ms=None), client=CONSUMER),
    GCase("receive with a batch size of 0", "ReceiveMessage", receive(batch=0), client=CONSUMER),
    GCase("receive with a bad SQL92 filter", "ReceiveMessage",
          receive(expression="a IN (", filter_type=pb.FilterType.SQL), client=CONSUMER),
    GCase("receive from a client that sent no settings", "ReceiveMessage", receive(), client=STRANGER),
    GCase("receive without a client id", "ReceiveMessage", receive(), client=NO_CLIENT),
    GCase("ack", "AckMessage", ack("received", 0), client=CONSUMER, values=("entries#",)),
    GCase("ack of an acked message", "AckMessage", ack("received", 0), client=CONSUMER),
    GCase("ack with a bad receipt handle", "AckMessage", ack("received", 1, handle="garbage"), client=CONSUMER),
    GCase("ack with an empty receipt handle", "AckMessage", ack("received", 1, handle=""), client=CONSUMER),
    GCase("ack with no entries", "AckMessage",
          lambda s: spb.AckMessageRequest(group=res(GROUP), topic=res(TOPIC)), client=CONSUMER),
    # A message received alone: Apache's broker answers an ack for another group of a message popped in a
    # batch, not its first, as it likes (PopBufferMergeService keeps the batch's checkpoint by group).
    GCase("ack for a missing group", "AckMessage", ack("renewed", 0, group=MISSING_GROUP), client=CONSUMER),
    GCase("ack for a missing topic", "AckMessage", ack("received", 1, topic=MISSING_TOPIC), client=CONSUMER),
    GCase("ack of a FIFO message", "AckMessage", ack("fifo", 0, group=FIFO_GROUP, topic=FIFO_TOPIC), client=FIFO),
    GCase("ack for another group", "AckMessage", ack("renewed", 0, group=FIFO_GROUP), client=CONSUMER),
    GCase("ack of an auto-renewed message", "AckMessage", ack("renewed", 0), client=CONSUMER),
    GCase("change invisible duration", "ChangeInvisibleDuration", change("received", 1), client=CONSUMER),
    GCase("change invisible duration of an acked message", "ChangeInvisibleDuration", change("received", 0),
          client=CONSUMER),
    GCase("change invisible duration with a bad receipt handle", "ChangeInvisibleDuration",
          change("received", 2, handle="garbage"), client=CONSUMER),
    GCase("change invisible duration too long", "ChangeInvisibleDuration",
          change("received", 2, 13 * 3_600_000), client=CONSUMER),
    GCase("change invisible duration negative", "ChangeInvisibleDuration", change("received", 2, -1000),
          client=CONSUMER),
    GCase("change invisible duration for a missing group", "ChangeInvisibleDuration",
          change("received", 2, group=MISSING_GROUP), client=CONSUMER),
    GCase("forward to the DLQ", "ForwardMessageToDeadLetterQueue", forward("received", 2), client=CONSUMER),
    GCase("forward to the DLQ with a bad receipt handle", "ForwardMessageToDeadLetterQueue",
          forward("received", 3, handle="garbage"), client=CONSUMER),
    GCase("forward to the DLQ for a missing group", "ForwardMessageToDeadLetterQueue",
          forward("received", 3, group=MISSING_GROUP), client=CONSUMER),
]

PRODUCER_END_CASES = [
    GCase("end a transaction: commit", "EndTransaction", end_transaction()),
    GCase("end a committed transaction again", "EndTransaction", end_transaction()),
    GCase("end a transaction with an empty message id", "EndTransaction",
          end_transaction(message_id="", key="tx3")),
    GCase("end a transaction without a resolution", "EndTransaction",
          end_transaction(pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED, key="tx2")),
    GCase("commit a transaction after ending it without a resolution", "EndTransaction",
          end_transaction(key="tx2")),
    GCase("end a transaction with an empty transaction id", "EndTransaction", end_transaction(transaction_id="")),
    GCase("end a transaction with a bad transaction id", "EndTransaction", end_transaction(transaction_id="nope")),
    GCase("recall a delay message", "RecallMessage", recall()),
    GCase("recall with a bad handle", "RecallMessage", recall(handle="garbage")),
    GCase("recall with an empty handle", "RecallMessage", recall(handle="")),
    GCase("recall from a missing topic", "RecallMessage", recall(MISSING_TOPIC)),
]

OFFSET_CASES = [
    GCase("pull", "PullMessage",
          lambda s: spb.PullMessageRequest(group=res(GROUP), message_queue=queue(), offset=0, batch_size=4,
                                           filter_expression=pb.FilterExpression(type=pb.FilterType.TAG,
                                                                                 expression="*"),
                                           long_polling_timeout=duration(0)), client=CONSUMER),
    GCase("pull from a missing topic", "PullMessage",
          lambda s: spb.PullMessageRequest(group=res(GROUP), message_queue=queue(MISSING_TOPIC), offset=0,
                                           batch_size=4, long_polling_timeout=duration(0)), client=CONSUMER),
    GCase("update an offset", "UpdateOffset",
          lambda s: spb.UpdateOffsetRequest(group=res(GROUP), message_queue=queue(queue_id=1), offset=0),
          client=CONSUMER),
    GCase("get an offset", "GetOffset",
          lambda s: spb.GetOffsetRequest(group=res(GROUP), message_queue=queue(queue_id=1)), client=CONSUMER),
    GCase("query the end offset", "QueryOffset",
          lambda s: spb.QueryOffsetRequest(message_queue=queue(), query_offset_policy=pb.QueryOffsetPolicy.END),
          client=CONSUMER),
    GCase("query an offset of a missing topic", "QueryOffset",
          lambda s: spb.QueryOffsetRequest(message_queue=queue(MISSING_TOPIC),
                                           query_offset_policy=pb.QueryOffsetPolicy.BEGINNING), client=CONSUMER),
    GCase("sync a lite subscription", "SyncLiteSubscription",
          lambda s: spb.SyncLiteSubscriptionRequest(action=pb.LiteSubscriptionAction.COMPLETE_ADD, topic=res(TOPIC),
                                                    group=res(GROUP), lite_topic_set=["gconf-lite"]),
          client=CONSUMER),
]

TERMINATION_CASES = [
    GCase("terminate a client that sent no settings", "NotifyClientTermination",
          lambda s: spb.NotifyClientTerminationRequest(group=res(GROUP)), client=STRANGER),
    GCase("terminate without a client id", "NotifyClientTermination",
          lambda s: spb.NotifyClientTerminationRequest(group=res(GROUP)), client=NO_CLIENT),
    GCase("terminate a producer", "NotifyClientTermination",
          lambda s: spb.NotifyClientTerminationRequest(), client=PRODUCER),
    GCase("terminate a consumer", "NotifyClientTermination",
          lambda s: spb.NotifyClientTerminationRequest(group=res(GROUP)), client=CONSUMER),
    GCase("terminate a consumer for a missing group", "NotifyClientTermination",
          lambda s: spb.NotifyClientTerminationRequest(group=res(MISSING_GROUP)), client=FIFO),
]

CASES = ROUTE_CASES + CLIENT_CASES + SEND_CASES + CONSUME_CASES + PRODUCER_END_CASES + OFFSET_CASES \
    + TERMINATION_CASES

# Differences that are deliberate, with the reason; each is also listed in docs/compatibility.md
# ("Differential conformance", gRPC). name -> reason.
_UNSERVED = ("Apache's proxy 5.5.0 does not serve this rocketmq-apis RPC (GrpcMessagingApplication has no "
             "override: gRPC UNIMPLEMENTED); OrbitMQ's proxy serves it for pull consumers "
             "(docs/compatibility.md: the proxy's PullMessage and offset RPCs)")
_INTERNAL = ("Apache's proxy answers INTERNAL_SERVER_ERROR: {why}; OrbitMQ answers the Code the protocol has "
             "for the client's error, which a client does not retry in vain")
DEVIATIONS: dict[str, str] = {
    "route without endpoints":
        "Apache's RouteActivity#queryRoute copies the request's (absent) endpoints: queues whose broker has no "
        "address to connect to; OrbitMQ names its own address (127.0.0.1:grpcServerPort). Every client sends "
        "its endpoints",
    "telemetry: consumer settings of a missing group":
        "Apache 5.5.0's ClientProcessor#registerConsumer (validateLiteMode, getGroupOrException) refuses "
        "Settings of a group its broker does not return (ILLEGAL_CONSUMER_GROUP, the stream ends "
        "INVALID_ARGUMENT); Apache's broker creates groups on that read when autoCreateSubscriptionGroup is on, "
        "OrbitMQ's only reads, so refusing would refuse every new group of a default cluster. OrbitMQ accepts "
        "the Settings; the group's receives answer CONSUMER_GROUP_NOT_FOUND",
    "send two messages":
        "Apache's proxy sends a batch as one MessageBatch and answers one entry whose message_id joins the "
        "ids with commas; OrbitMQ answers one entry per message, each with its own id and status",
    "send to a missing topic":
        "Apache's topic message type check (TopicMessageTypeValidator) runs before the route lookup and reads "
        "a missing topic as type UNSPECIFIED: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; OrbitMQ answers "
        "TOPIC_NOT_FOUND, as QueryRoute does for the same topic",
    "recall from a missing topic":
        "as for the send to a missing topic: Apache's type check answers MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "
        "OrbitMQ TOPIC_NOT_FOUND",
    "receive of a FIFO group":
        "Apache's GrpcConverter#buildMessage leaves __SHARDINGKEY (not in MessageConst.STRING_HASH_SET) among "
        "the user properties; OrbitMQ gives the message group only as system_properties.message_group",
    "receive with a batch size of 0":
        "Apache's proxy pops zero messages and answers MESSAGE_NOT_FOUND after the long poll; OrbitMQ "
        "refuses the request at once (BAD_REQUEST \"batch size must be positive\")",
    "receive with a bad SQL92 filter":
        _INTERNAL.format(why="\"parse the consumer's subscription failed\""),
    "receive from a client that sent no settings":
        _INTERNAL.format(why="\"settings\" is null (ReceiveMessageActivity#receiveMessage)").replace(
            "the Code the protocol has for the client's error, which a client does not retry in vain",
            "the receive from the request alone (here MESSAGE_NOT_FOUND: the messages are in flight); the Python "
            "client receives before its Settings reached the proxy"),
    "ack with a bad receipt handle":
        _INTERNAL.format(why="ReceiptHandle#decode throws IllegalArgumentException, which no handler maps"),
    "ack with an empty receipt handle":
        _INTERNAL.format(why="ReceiptHandle#decode throws IllegalArgumentException, which no handler maps"),
    "ack with no entries":
        _INTERNAL.format(why="\"ack message result is empty\""),
    "ack for a missing topic":
        _INTERNAL.format(why="the broker's refusal is not mapped"),
    "change invisible duration with a bad receipt handle":
        _INTERNAL.format(why="ReceiptHandle#decode throws IllegalArgumentException"),
    "forward to the DLQ with a bad receipt handle":
        _INTERNAL.format(why="ReceiptHandle#decode throws IllegalArgumentException"),
    "change invisible duration of an acked message":
        "Apache's broker writes a new checkpoint for it (ChangeInvisibleTimeProcessor) and answers OK, so an "
        "acked message is delivered again when the checkpoint revives; OrbitMQ's broker refuses to revive an "
        "acked message and the proxy answers INVALID_RECEIPT_HANDLE \"the message has already been acked\"",
    "end a transaction with an empty message id":
        "Apache's proxy ends the transaction from the data it kept under the transaction id "
        "(TransactionDataManager) and ignores the request's message id: OK. OrbitMQ keeps no such data: the "
        "transaction id carries the half message's position, and the message id the broker's END_TRANSACTION "
        "needs (msgId) comes from the request, so an empty one is refused (ILLEGAL_MESSAGE_ID); every client "
        "sends the id it got from SendMessage",
    "commit a transaction after ending it without a resolution":
        "Apache's proxy drops its transaction data on any EndTransaction (TransactionDataManager"
        "#pollNoExpireTransactionData), an unresolved one too, so the producer can only commit when the broker "
        "checks back (INTERNAL_SERVER_ERROR \"cannot found transaction data\"); OrbitMQ keeps the transaction "
        "open until it is committed or rolled back, and the commit succeeds",
    "end a transaction with a bad transaction id":
        _INTERNAL.format(why="\"cannot found transaction data\"") + " (INVALID_TRANSACTION_ID)",
    "pull": _UNSERVED,
    "pull from a missing topic": _UNSERVED,
    "update an offset": _UNSERVED,
    "get an offset": _UNSERVED,
    "query the end offset": _UNSERVED,
    "query an offset of a missing topic": _UNSERVED,
    "sync a lite subscription":
        "OrbitMQ serves no lite topics (MessageType LITE): SyncLiteSubscription answers NOT_IMPLEMENTED; Apache "
        "5.5.0 answers ILLEGAL_TOPIC for a group not bound to a lite topic",
}
