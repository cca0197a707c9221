"""ConsumeMessageHook: code run around every listener call of a push consumer (upstream's
ConsumeMessageHook and ConsumeMessageContext), the way the client-side consumption trace
(ConsumeMessageTraceHookImpl) is attached.

``consume_message_before`` sees the batch, queue and group before the listener; the same context
reaches ``consume_message_after`` with ``success``, ``status`` (the listener's status name) and
``props[CONSUME_CONTEXT_TYPE]`` (the ConsumeReturnType) filled in. A hook that raises is logged
and the consumption goes on, as DefaultMQPushConsumerImpl#executeHookBefore/After do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.message import MessageExt

log = logging.getLogger("orbitmq.remoting_client.consume_hook")

CONSUME_CONTEXT_TYPE = "ConsumeContextType"  # MixAll.CONSUME_CONTEXT_TYPE


@dataclass
class ConsumeMessageContext:
    consumer_group: str
    msg_list: list[MessageExt]
    mq: MessageQueueRef
    namespace: str | None = None
    success: bool = False
    status: str = ""
    trace_context: Any = None  # what a hook keeps from before to after (mqTraceContext)
    props: dict[str, str] = field(default_factory=dict)


class ConsumeMessageHook(Protocol):
    def hook_name(self) -> str: ...

    def consume_message_before(self, context: ConsumeMessageContext) -> None: ...

    def consume_message_after(self, context: ConsumeMessageContext) -> None: ...


def run_hooks_before(hooks: list[ConsumeMessageHook], context: ConsumeMessageContext) -> None:
    for hook in hooks:
        try:
            hook.consume_message_before(context)
        except Exception:  # a hook's failure is not the consumption's
            log.exception("consumeMessageHook %s before failed", _name(hook))


def run_hooks_after(hooks: list[ConsumeMessageHook], context: ConsumeMessageContext) -> None:
    for hook in hooks:
        try:
            hook.consume_message_after(context)
        except Exception:
            log.exception("consumeMessageHook %s after failed", _name(hook))


def _name(hook: ConsumeMessageHook) -> str:
    try:
        return hook.hook_name()
    except Exception:
        return type(hook).__name__
