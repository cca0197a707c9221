"""DeliveryChecker: what chaos tests assert about messages across failures.

It records every acknowledged send (key, message id, message group, sequence in its group) and
every delivery, and at the end checks: no acknowledged message lost, duplicates counted and
within a bound, and per-message-group order kept (FIFO topics).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class CheckReport:
    """What verify() found; ``problems`` is empty when every check passed."""

    acked: int
    delivered_distinct: int
    deliveries: int
    lost: list[str]
    duplicates: int
    unacked_delivered: int
    order_violations: list[str]
    problems: list[str] = field(default_factory=list)

    def duplicate_ratio(self) -> float:
        return self.duplicates / self.acked if self.acked else 0.0

    def summary(self) -> str:
        return (f"acked sends {self.acked}, distinct delivered {self.delivered_distinct}, deliveries "
                f"{self.deliveries}, lost {len(self.lost)}, duplicates {self.duplicates} ({self.duplicate_ratio():.2%} of "
                f"the acked), delivered but "
                f"never acked by the broker {self.unacked_delivered}, order violations "
                f"{len(self.order_violations)}")


class DeliveryChecker:
    """Thread-safe enough for one event loop (no awaits inside its methods)."""

    def __init__(self) -> None:
        self.acked: dict[str, str] = {}  # key -> message id of the acknowledged send
        self.group_of: dict[str, str] = {}
        self.seq_of: dict[str, int] = {}
        self.attempted: set[str] = set()  # sent, acknowledged or not (an error may still be stored)
        self.send_errors: Counter[str] = Counter()
        self.client_resends = 0  # sends of a key again after an error: each may be a duplicate
        self.delivered: Counter[str] = Counter()
        self.first_seen: dict[str, list[int]] = defaultdict(list)  # group -> seqs in first-delivery order
        self.ack_failures = 0  # deliveries whose ack failed: they come back (a duplicate)
        self.first_delivered_at: list[float] = []  # monotonic time of each key's first delivery
        self.faults: list[float] = []  # monotonic times of injected faults (mark_fault)

    # ---- recording ------------------------------------------------------------------------------

    def sent(self, key: str, message_id: str, group: str | None = None, seq: int | None = None) -> None:
        self.attempted.add(key)
        self.acked[key] = message_id
        if group is not None:
            self.group_of[key] = group
            if seq is not None:
                self.seq_of[key] = seq

    def send_failed(self, key: str, error: str, will_resend: bool) -> None:
        self.attempted.add(key)
        self.send_errors[error.split(":")[0]] += 1
        if will_resend:
            self.client_resends += 1

    def consumed(self, key: str, group: str | None = None, seq: int | None = None) -> None:
        if not key:
            return
        self.delivered[key] += 1
        if self.delivered[key] == 1:
            self.first_delivered_at.append(time.monotonic())
            if group and seq is not None:
                self.first_seen[group].append(seq)

    def mark_fault(self) -> None:
        """A master was killed or stopped now: consumption acknowledged shortly before it may be
        delivered again (the new master's consumer offsets lag the old one's)."""
        self.faults.append(time.monotonic())

    def ack_failed(self, count: int = 1) -> None:
        self.ack_failures += count

    def missing(self) -> set[str]:
        """Acknowledged keys not delivered yet."""
        return {k for k in self.acked if k not in self.delivered}

    # ---- checks ---------------------------------------------------------------------------------

    def duplicate_bound(self, proxy_possible_duplicates: int = 0, slack: int = 0,
                        offset_lag_s: float = 0.0) -> int:
        """Duplicates the recorded failures can explain: client resends, proxy resends after an
        unknown outcome, deliveries whose ack failed, messages first delivered within
        ``offset_lag_s`` before a fault (consumer progress not yet copied to the slaves); plus
        ``slack`` (pops in flight)."""
        lagging = sum(1 for t in self.first_delivered_at for f in self.faults if f - offset_lag_s <= t <= f)
        return self.client_resends + proxy_possible_duplicates + self.ack_failures + lagging + slack

    def verify(self, max_duplicates: int | None = None) -> CheckReport:
        lost = sorted(self.missing())
        duplicates = sum(n - 1 for n in self.delivered.values() if n > 1)
        stray = [k for k in self.delivered if k not in self.attempted]
        violations: list[str] = []
        for group, seqs in self.first_seen.items():
            # First deliveries of a group come in send order, and none skips an acknowledged one.
            acked_seqs = sorted(self.seq_of[k] for k in self.acked if self.group_of.get(k) == group and k in self.seq_of)
            for earlier, later in zip(seqs, seqs[1:], strict=False):
                if later < earlier:
                    violations.append(f"group {group}: seq {later} delivered first after {earlier}")
            seen = set(seqs)
            top = max(seqs) if seqs else -1
            skipped = [s for s in acked_seqs if s < top and s not in seen]
            if skipped:
                violations.append(f"group {group}: acknowledged seqs {skipped[:5]} skipped (first delivered "
                                  f"later or never)")
        report = CheckReport(len(self.acked), len(self.delivered), sum(self.delivered.values()), lost, duplicates,
                             len([k for k in self.delivered if k not in self.acked]), violations)
        if lost:
            report.problems.append(f"{len(lost)} acknowledged message(s) never delivered, e.g. {lost[:5]}")
        if stray:
            report.problems.append(f"{len(stray)} delivered message(s) were never sent, e.g. {stray[:5]}")
        if violations:
            report.problems.append("per-group order broken: " + "; ".join(violations[:5]))
        if max_duplicates is not None and duplicates > max_duplicates:
            report.problems.append(f"{duplicates} duplicate deliveries, more than the {max_duplicates} the "
                                   f"recorded failures explain")
        return report
