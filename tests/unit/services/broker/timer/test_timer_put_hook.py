"""The put-time conversion (HookUtils.handleScheduleMessage) on single messages."""

from __future__ import annotations

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.broker.timer.put_hook import TimerPutHook
from orbitmq.common.message import string_to_properties
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE

NOW = 1_795_733_057_123


def _hook(**cfg: object) -> TimerPutHook:
    return TimerPutHook(MessageStoreConfig(store_path_root_dir="/nonexistent", **cfg), lambda: NOW)


def _msg(props: dict[str, str], sys_flag: int = 0, topic: str = "T") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic, 3, b"x", properties=dict(props), sys_flag=sys_flag)


def test_deliver_ms_goes_to_the_timer_topic() -> None:
    msg = _msg({"TIMER_DELIVER_MS": str(NOW + 5000), "UNIQ_KEY": "U"})
    assert _hook()(msg) is None
    assert (msg.topic, msg.queue_id) == ("rmq_sys_wheel_timer", 0)
    assert msg.properties["REAL_TOPIC"] == "T" and msg.properties["REAL_QID"] == "3"
    assert msg.properties["TIMER_OUT_MS"] == str((NOW + 5000) // 1000 * 1000)
    assert string_to_properties(msg.properties_string) == msg.properties


def test_delay_sec_and_delay_ms_count_from_the_broker_clock() -> None:
    sec = _msg({"TIMER_DELAY_SEC": "10"})
    _hook()(sec)
    assert sec.properties["TIMER_OUT_MS"] == str((NOW + 10_000) // 1000 * 1000)
    ms = _msg({"TIMER_DELAY_MS": "2500"})
    _hook()(ms)
    assert ms.properties["TIMER_OUT_MS"] == str((NOW + 2500) // 1000 * 1000)
    # TIMER_DELAY_SEC wins over the others.
    both = _msg({"TIMER_DELAY_SEC": "1", "TIMER_DELIVER_MS": str(NOW + 60_000)})
    _hook()(both)
    assert both.properties["TIMER_OUT_MS"] == str((NOW + 1000) // 1000 * 1000)


def test_exact_precision_multiple_goes_one_slot_earlier() -> None:
    msg = _msg({"TIMER_DELIVER_MS": "1795733070000"})
    _hook()(msg)
    assert msg.properties["TIMER_OUT_MS"] == "1795733069000"


def test_delay_level_wins_and_timer_properties_go() -> None:
    msg = _msg({"DELAY": "2", "TIMER_DELIVER_MS": str(NOW + 5000), "TIMER_DELAY_SEC": "4"})
    assert _hook()(msg) is None
    assert msg.topic == "T" and msg.properties == {"DELAY": "2"}
    assert msg.properties_string == "DELAY\x012\x02"


def test_not_converted() -> None:
    hook = _hook()
    for msg in (_msg({"TIMER_DELIVER_MS": str(NOW + 5000), "TIMER_OUT_MS": "1"}),  # already through the wheel
                _msg({"TIMER_DELIVER_MS": str(NOW + 5000)}, topic="rmq_sys_wheel_timer"),  # a roll
                _msg({"TIMER_DELIVER_MS": str(NOW + 5000)}, sys_flag=TRANSACTION_PREPARED_TYPE),  # half message
                _msg({"TIMER_DELIVER_MS": str(NOW - 1)}),  # due: straight to the real topic
                _msg({"TIMER_DELIVER_MS": str(NOW)}),
                _msg({"KEYS": "k"})):
        topic = msg.topic
        assert hook(msg) is None
        assert msg.topic == topic and "TIMER_OUT_MS" not in msg.properties or msg.properties["TIMER_OUT_MS"] == "1"
    committed = _msg({"TIMER_DELIVER_MS": str(NOW + 5000)}, sys_flag=TRANSACTION_COMMIT_TYPE)
    assert hook(committed) is None and committed.topic == "rmq_sys_wheel_timer"


def test_refusals() -> None:
    hook = _hook()
    for props in ({"TIMER_DELIVER_MS": "x"}, {"TIMER_DELAY_SEC": "1.0"}, {"TIMER_DELAY_MS": " 5"},
                  {"TIMER_DELIVER_MS": str(NOW + 259_200_001)},
                  {"TIMER_DELIVER_MS": str(NOW - 5), "TIMER_DEL_UNIQKEY": "T+U"}):
        result = hook(_msg(props))
        assert result is not None and result.status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, props
        assert "259200000ms" in result.remark
    assert hook(_msg({"TIMER_DELIVER_MS": str(NOW + 259_200_000)})) is None  # exactly the max is fine
    off = _hook(timer_wheel_enable=False)(_msg({"TIMER_DELAY_SEC": "3"}))
    assert off is not None and off.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
    assert off.remark == "accurate timer message is not enabled, timerWheelEnable is false"


def test_flow_control_refuses_a_full_slot() -> None:
    hook = _hook(timer_congest_num_each_slot=2)
    hook.slot_num = lambda slot_ms: 4
    result = hook(_msg({"TIMER_DELAY_SEC": "3"}))
    assert result is not None and result.status is PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL
    hook.slot_num = lambda slot_ms: 2
    assert hook(_msg({"TIMER_DELAY_SEC": "3"})) is None
