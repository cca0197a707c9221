"""GrpcValidator: checks of what raw gRPC callers send (official clients check locally first)."""

from __future__ import annotations

import re

from orbitmq.common import validators
from orbitmq.common.constants import is_sys_consumer_group
from orbitmq.common.namespace import NAMESPACE_SEPARATOR, wrap_namespace
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.errors import ProxyError

Code = pb.Code


_ISO_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def contains_control_character(data: str) -> bool:
    """CharMatcher.javaIsoControl: U+0000–U+001F and U+007F–U+009F."""
    # Control characters are never printable, so the (C-speed) common case skips the regex.
    return not data.isprintable() and _ISO_CONTROL.search(data) is not None


# Names that passed validate_topic: the checks depend on the name alone, and every send asks.
_VALID_TOPICS: set[str] = set()
_VALID_TOPICS_MAX = 4096


def validate_topic(name: str) -> None:
    if name in _VALID_TOPICS:
        return
    try:
        validators.check_topic(name)
    except validators.ValidationError as exc:
        raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
    if validators.is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")
    if len(_VALID_TOPICS) >= _VALID_TOPICS_MAX:
        _VALID_TOPICS.clear()
    _VALID_TOPICS.add(name)


def validate_namespace(namespace: str, code: int) -> None:
    """A namespace the wrapped names can be unwrapped by: upstream validates only the wrapped name
    (characters, length), and beyond it a ``%`` is refused here, since NamespaceUtil#withoutNamespace
    cuts at the first one (``a%b`` + ``t`` would come back as ``b%t`` of namespace ``a``)."""
    if namespace in _VALID_NAMESPACES:
        return
    if NAMESPACE_SEPARATOR in namespace or validators.is_topic_or_group_illegal(namespace) or namespace.isspace():
        raise ProxyError(code, f"the namespace[{namespace}] contains illegal characters, allowing only "
                               f"^[|a-zA-Z0-9_-]+$")
    if len(_VALID_NAMESPACES) >= _VALID_TOPICS_MAX:
        _VALID_NAMESPACES.clear()
    _VALID_NAMESPACES.add(namespace)


_VALID_NAMESPACES: set[str] = set()


def _wrapped(resource: pb.Resource, code: int) -> str:
    """GrpcConverter#wrapResourceWithNamespace, its namespace checked first (``code`` if illegal)."""
    namespace = resource.resource_namespace
    if not namespace:
        return resource.name
    validate_namespace(namespace, code)
    return wrap_namespace(namespace, resource.name)


def topic_of(resource: pb.Resource) -> str:
    """GrpcValidator#validateTopic(Resource): the topic the brokers know, ``{namespace}%{name}``,
    validated as a whole; ILLEGAL_TOPIC otherwise."""
    name = _wrapped(resource, Code.ILLEGAL_TOPIC)
    validate_topic(name)
    return name


def group_of(resource: pb.Resource) -> str:
    """topic_of for a consumer group: ``{namespace}%{name}``; ILLEGAL_CONSUMER_GROUP otherwise."""
    name = _wrapped(resource, Code.ILLEGAL_CONSUMER_GROUP)
    validate_consumer_group(name)
    return name


def validate_consumer_group(name: str) -> None:
    try:
        validators.check_group(name)
    except validators.ValidationError as exc:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, str(exc)) from None
    if is_sys_consumer_group(name):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_invisible_time(invisible_ms: int, min_ms: int, max_ms: int) -> None:
    if invisible_ms < min_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}")
    if max_ms > 0 and invisible_ms > max_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms}")


def validate_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if contains_control_character(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def validate_message_key(key: str) -> None:
    if key:
        if not key.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if contains_control_character(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def validate_message_group(group: str, max_size: int) -> None:
    if group:
        if not group.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if max_size > 0 and len(group.encode("utf-8")) >= max_size:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}")
        if contains_control_character(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


# Settings.client_properties limits, as rocketmq-apis' definition.proto states them.
CLIENT_PROPERTIES_MAX_ENTRIES = 32
CLIENT_PROPERTY_KEY_MAX_LENGTH = 64
CLIENT_PROPERTY_VALUE_MAX_LENGTH = 256
CLIENT_PROPERTIES_MAX_BYTES = 4096
_CLIENT_PROPERTY_KEY = re.compile(r"[a-zA-Z][a-zA-Z0-9_.-]*")


def _invalid_properties(detail: str) -> ProxyError:
    # A refused Settings ends the Telemetry stream with INVALID_ARGUMENT and this text only
    # (ClientActivity#processTelemetryException), so the text names the code too.
    return ProxyError(Code.INVALID_CLIENT_PROPERTIES, f"INVALID_CLIENT_PROPERTIES: {detail}")


def validate_client_properties(settings: pb.Settings) -> None:
    """INVALID_CLIENT_PROPERTIES (40021) when Settings.client_properties break a limit: more than
    32 pairs, a key not matching [a-zA-Z][a-zA-Z0-9_.-]* or longer than 64, a value longer than
    256, or more than 4 KiB serialized (the map field alone, as the client sends it)."""
    props = settings.client_properties
    if not props:
        return
    if len(props) > CLIENT_PROPERTIES_MAX_ENTRIES:
        raise _invalid_properties(
                         f"client properties have {len(props)} entries, more than {CLIENT_PROPERTIES_MAX_ENTRIES}")
    for key, value in props.items():
        if len(key) > CLIENT_PROPERTY_KEY_MAX_LENGTH or not _CLIENT_PROPERTY_KEY.fullmatch(key):
            raise _invalid_properties(
                             f"client property key {key!r} must match [a-zA-Z][a-zA-Z0-9_.-]* and have at most "
                             f"{CLIENT_PROPERTY_KEY_MAX_LENGTH} characters")
        if len(value) > CLIENT_PROPERTY_VALUE_MAX_LENGTH:
            raise _invalid_properties(
                             f"client property {key} has a value longer than {CLIENT_PROPERTY_VALUE_MAX_LENGTH}")
    size = pb.Settings(client_properties=props).ByteSize()
    if size > CLIENT_PROPERTIES_MAX_BYTES:
        raise _invalid_properties(
                         f"client properties take {size} bytes, more than {CLIENT_PROPERTIES_MAX_BYTES}")
