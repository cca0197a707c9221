"""NamespaceUtil's rules (orbitmq.common.namespace), case by case as upstream's NamespaceUtilTest."""

from __future__ import annotations

import pytest

from orbitmq.common.namespace import (
    is_already_with_namespace,
    namespace_of,
    without_namespace,
    without_retry_and_dlq,
    wrap_namespace,
    wrap_namespace_and_retry,
)

NS = "MQ_INST_XXX"
TOPIC = "TOPIC_XXX"
GROUP = "GID_XXX"


@pytest.mark.parametrize(("resource", "wrapped"), [
    (TOPIC, f"{NS}%{TOPIC}"),
    (f"{NS}%{TOPIC}", f"{NS}%{TOPIC}"),  # already wrapped: unchanged
    (f"%RETRY%{GROUP}", f"%RETRY%{NS}%{GROUP}"),
    (f"%RETRY%{NS}%{GROUP}", f"%RETRY%{NS}%{GROUP}"),
    (f"%DLQ%{GROUP}", f"%DLQ%{NS}%{GROUP}"),
    (f"%DLQ%{NS}%{GROUP}", f"%DLQ%{NS}%{GROUP}"),
    ("rmq_sys_topic", "rmq_sys_topic"),  # system topics and groups are never wrapped
    ("RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRACE_TOPIC"),
    ("CID_RMQ_SYS_X", "CID_RMQ_SYS_X"),
    ("", ""),
])
def test_wrap_namespace(resource: str, wrapped: str) -> None:
    assert wrap_namespace(NS, resource) == wrapped
    assert wrap_namespace("", resource) == resource


@pytest.mark.parametrize(("resource", "bare"), [
    (f"{NS}%{TOPIC}", TOPIC),
    (f"%RETRY%{NS}%{GROUP}", f"%RETRY%{GROUP}"),
    (f"%DLQ%{NS}%{GROUP}", f"%DLQ%{GROUP}"),
    (TOPIC, TOPIC),
    (f"%RETRY%{GROUP}", f"%RETRY%{GROUP}"),
    ("%starts_with_separator", "%starts_with_separator"),
    ("rmq_sys_a%b", "rmq_sys_a%b"),
    ("", ""),
])
def test_without_namespace(resource: str, bare: str) -> None:
    assert without_namespace(resource) == bare


def test_without_namespace_takes_off_only_the_namespace_named() -> None:
    assert without_namespace(f"{NS}%{TOPIC}", NS) == TOPIC
    assert without_namespace(f"%RETRY%{NS}%{GROUP}", NS) == f"%RETRY%{GROUP}"
    assert without_namespace(f"%RETRY%{NS}%{GROUP}", "MQ_INST_XXX1") == f"%RETRY%{NS}%{GROUP}"
    assert without_namespace(f"{NS}%{TOPIC}", "") == f"{NS}%{TOPIC}"


@pytest.mark.parametrize(("resource", "namespace"), [
    (TOPIC, ""), (f"{NS}%{TOPIC}", NS), (f"%RETRY%{NS}%{GROUP}", NS), (f"%DLQ%{NS}%{GROUP}", NS),
    (f"%RETRY%{GROUP}", ""), ("rmq_sys_a%b", ""), ("", ""),
])
def test_namespace_of(resource: str, namespace: str) -> None:
    assert namespace_of(resource) == namespace


def test_round_trip_and_retry_names() -> None:
    for name in (TOPIC, f"%RETRY%{GROUP}", f"%DLQ%{GROUP}"):
        wrapped = wrap_namespace(NS, name)
        assert (namespace_of(wrapped), without_namespace(wrapped)) == (NS, name)
    assert wrap_namespace_and_retry(NS, GROUP) == f"%RETRY%{NS}%{GROUP}"
    assert wrap_namespace_and_retry("", GROUP) == f"%RETRY%{GROUP}"
    assert wrap_namespace_and_retry(NS, "") is None
    assert without_retry_and_dlq(f"%RETRY%{NS}%{GROUP}") == f"{NS}%{GROUP}"
    assert is_already_with_namespace(f"%DLQ%{NS}%{GROUP}", NS)
    assert not is_already_with_namespace(f"{NS}1%{GROUP}", NS)
    assert not is_already_with_namespace("rmq_sys_x", NS)
