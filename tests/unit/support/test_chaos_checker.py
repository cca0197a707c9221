"""The chaos tests' DeliveryChecker: a clean history passes, each kind of fault is reported."""

from __future__ import annotations

from tests.support.checker import DeliveryChecker


def test_clean_history_with_explained_duplicates_passes() -> None:
    c = DeliveryChecker()
    for seq in range(4):
        c.sent(f"g:{seq}", f"id{seq}", "g", seq)
    c.send_failed("g:1", "INTERNAL_SERVER_ERROR: x", will_resend=True)
    for seq in (0, 1, 1, 2, 3):
        c.consumed(f"g:{seq}", "g", seq)
    assert c.verify(max_duplicates=c.duplicate_bound()).problems == []
    assert c.verify(max_duplicates=0).problems == [
        "1 duplicate deliveries, more than the 0 the recorded failures explain"]


def test_loss_is_reported() -> None:
    c = DeliveryChecker()
    c.sent("a", "1")
    c.sent("b", "2")
    c.consumed("b")
    report = c.verify()
    assert report.lost == ["a"] and "never delivered" in report.problems[0]


def test_group_order_and_skips_are_reported() -> None:
    c = DeliveryChecker()
    for seq in range(4):
        c.sent(f"g:{seq}", f"id{seq}", "g", seq)
    for seq in (0, 2, 1, 3):
        c.consumed(f"g:{seq}", "g", seq)
    assert any("order" in p for p in c.verify().problems)
    skipped = DeliveryChecker()
    for seq in range(3):
        skipped.sent(f"h:{seq}", f"id{seq}", "h", seq)
    for seq in (0, 2):
        skipped.consumed(f"h:{seq}", "h", seq)
    problems = skipped.verify().problems
    assert any("skipped" in p for p in problems) and any("never delivered" in p for p in problems)


def test_redelivery_of_an_unacked_prefix_keeps_order() -> None:
    c = DeliveryChecker()
    for seq in range(3):
        c.sent(f"g:{seq}", f"id{seq}", "g", seq)
    for seq in (0, 1, 0, 1, 2):
        c.consumed(f"g:{seq}", "g", seq)
    c.ack_failed(2)
    assert c.verify(max_duplicates=c.duplicate_bound()).problems == []


def test_delivery_of_a_message_never_sent_is_reported() -> None:
    c = DeliveryChecker()
    c.consumed("ghost")
    assert "never sent" in c.verify().problems[0]
