"""NamespaceUtil: how a namespace wraps topic and group names, ``{namespace}%{name}``.

Tenants of one cluster keep apart by a namespace prefix on every topic and group the brokers
see. A retry or DLQ name keeps its prefix outside the namespace, ``%RETRY%{namespace}%{group}``,
and system topics and groups are never wrapped. Remoting clients wrap names themselves
(ClientConfig.withNamespace); the proxy wraps what gRPC clients name in a Resource and unwraps
what it answers (docs/architecture.md).
"""

from __future__ import annotations

from orbitmq.common import validators
from orbitmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_dlq_topic,
    is_retry_topic,
    is_sys_consumer_group,
)

NAMESPACE_SEPARATOR = "%"
_RETRY_PREFIX_LENGTH = len(RETRY_GROUP_TOPIC_PREFIX)
_DLQ_PREFIX_LENGTH = len(DLQ_GROUP_TOPIC_PREFIX)


def _is_system_resource(resource: str) -> bool:
    return bool(resource) and (validators.is_system_topic(resource) or is_sys_consumer_group(resource))


def without_retry_and_dlq(resource: str) -> str:
    """The name behind a %RETRY% or %DLQ% prefix (the name itself without one)."""
    if not resource:
        return ""
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return resource[_RETRY_PREFIX_LENGTH:]
    if resource.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return resource[_DLQ_PREFIX_LENGTH:]
    return resource


def _retry_or_dlq_prefix(resource: str) -> str:
    if is_retry_topic(resource):
        return RETRY_GROUP_TOPIC_PREFIX
    if is_dlq_topic(resource):
        return DLQ_GROUP_TOPIC_PREFIX
    return ""


def is_already_with_namespace(resource: str, namespace: str) -> bool:
    if not namespace or not resource or _is_system_resource(resource):
        return False
    return without_retry_and_dlq(resource).startswith(namespace + NAMESPACE_SEPARATOR)


def wrap_namespace(namespace: str, resource: str) -> str:
    """NamespaceUtil#wrapNamespace: ``ns%topic``, ``%RETRY%ns%group``; system and already wrapped
    names, and any name without a namespace, unchanged."""
    if not namespace or not resource:
        return resource
    if _is_system_resource(resource) or is_already_with_namespace(resource, namespace):
        return resource
    return f"{_retry_or_dlq_prefix(resource)}{namespace}{NAMESPACE_SEPARATOR}{without_retry_and_dlq(resource)}"


def wrap_namespace_and_retry(namespace: str, consumer_group: str) -> str | None:
    """NamespaceUtil#wrapNamespaceAndRetry: a group's retry topic, ``%RETRY%ns%group``."""
    if not consumer_group:
        return None
    return RETRY_GROUP_TOPIC_PREFIX + wrap_namespace(namespace, consumer_group)


def without_namespace(resource: str, namespace: str | None = None) -> str:
    """NamespaceUtil#withoutNamespace: ``ns%topic`` -> ``topic``, ``%RETRY%ns%group`` -> ``%RETRY%group``.

    With ``namespace`` only that namespace is taken off; without, whatever precedes the first
    ``%`` of the name (behind a retry/DLQ prefix) is.
    """
    if not resource:
        return resource
    if namespace is not None and (
            not namespace or not without_retry_and_dlq(resource).startswith(namespace + NAMESPACE_SEPARATOR)):
        return resource
    if _is_system_resource(resource):
        return resource
    bare = without_retry_and_dlq(resource)
    index = bare.find(NAMESPACE_SEPARATOR)
    if index > 0:
        return _retry_or_dlq_prefix(resource) + bare[index + 1:]
    return resource


def namespace_of(resource: str) -> str:
    """NamespaceUtil#getNamespaceFromResource: ``ns`` of ``ns%topic`` or ``%RETRY%ns%group``, else ""."""
    if not resource or _is_system_resource(resource):
        return ""
    bare = without_retry_and_dlq(resource)
    index = bare.find(NAMESPACE_SEPARATOR)
    return bare[:index] if index > 0 else ""
