"""OrbitMQ: a RocketMQ 5-compatible messaging cluster in Python."""
import os

__version__ = "0.1.0"

# gRPC's fork handlers kill a child forked while another thread is inside a gRPC call: with a
# preexec_fn (PySpark's JVM launch, `orbitmq local --ha`'s children) fork() runs them and the
# child dies of SIGABRT before exec (tests/unit/sdk/test_grpc_fork.py). OrbitMQ never uses a channel
# across fork, so it turns them off before anything imports grpc, unless the user chose a value.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# The SDK's public names, imported on first use (PEP 562) so that the services and the CLI, which
# import orbitmq.* too, do not load the gRPC clients.
_SDK_EXPORTS = {
    "ClientConfig": "orbitmq.clientcore", "Credentials": "orbitmq.clientcore", "Message": "orbitmq.clientcore",
    "MessageQueue": "orbitmq.clientcore", "ReceivedMessage": "orbitmq.clientcore", "SendReceipt": "orbitmq.clientcore",
    "ClientError": "orbitmq.clientcore", "BadRequestError": "orbitmq.clientcore", "NotFoundError": "orbitmq.clientcore",
    "TransportError": "orbitmq.clientcore",
    "Producer": "orbitmq.producer", "AsyncProducer": "orbitmq.producer", "TransactionResolution": "orbitmq.producer",
    "SimpleConsumer": "orbitmq.consumer", "AsyncSimpleConsumer": "orbitmq.consumer",
    "PushConsumer": "orbitmq.consumer", "AsyncPushConsumer": "orbitmq.consumer",
    "PullConsumer": "orbitmq.consumer", "AsyncPullConsumer": "orbitmq.consumer",
    "ConsumeResult": "orbitmq.consumer", "FilterExpression": "orbitmq.consumer",
    "OffsetOutOfRangeError": "orbitmq.consumer",
}


def __getattr__(name: str):
    module = _SDK_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'orbitmq' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
