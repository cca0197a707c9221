"""Message and pull sysFlag bits, with RocketMQ's values (MessageSysFlag, PullSysFlag).

They travel in SendMessageRequestHeader.sysFlag, the CommitLog record and PullMessageRequestHeader,
so they must match upstream bit for bit.
"""

# --- MessageSysFlag -----------------------------------------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7
COMPRESSION_LZ4_TYPE = 0x1 << 8
COMPRESSION_ZSTD_TYPE = 0x2 << 8
COMPRESSION_ZLIB_TYPE = 0x3 << 8
COMPRESSION_TYPE_COMPARATOR = 0x7 << 8

_TRANSACTION_MASK = TRANSACTION_ROLLBACK_TYPE


def get_transaction_value(flag: int) -> int:
    """The transaction type bits (NOT/PREPARED/COMMIT/ROLLBACK) of a message sysFlag."""
    return flag & _TRANSACTION_MASK


def reset_transaction_value(flag: int, transaction_type: int) -> int:
    """Replace the transaction type bits, e.g. when a half message is committed."""
    return (flag & ~_TRANSACTION_MASK) | transaction_type


def clear_compressed_flag(flag: int) -> int:
    return flag & ~COMPRESSED_FLAG


def check(flag: int, expected: int) -> bool:
    """True when every bit of ``expected`` is set in ``flag``."""
    return flag & expected == expected


# --- PullSysFlag --------------------------------------------------------------------------------
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x1 << 1
PULL_FLAG_SUBSCRIPTION = 0x1 << 2
PULL_FLAG_CLASS_FILTER = 0x1 << 3
PULL_FLAG_LITE_PULL_MESSAGE = 0x1 << 4


def build_pull_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool,
                        lite_pull: bool = False) -> int:
    flag = 0
    if commit_offset:
        flag |= PULL_FLAG_COMMIT_OFFSET
    if suspend:
        flag |= PULL_FLAG_SUSPEND
    if subscription:
        flag |= PULL_FLAG_SUBSCRIPTION
    if class_filter:
        flag |= PULL_FLAG_CLASS_FILTER
    if lite_pull:
        flag |= PULL_FLAG_LITE_PULL_MESSAGE
    return flag


def clear_commit_offset_flag(flag: int) -> int:
    return flag & ~PULL_FLAG_COMMIT_OFFSET


def clear_suspend_flag(flag: int) -> int:
    return flag & ~PULL_FLAG_SUSPEND


def has_commit_offset_flag(flag: int) -> bool:
    return bool(flag & PULL_FLAG_COMMIT_OFFSET)


def has_suspend_flag(flag: int) -> bool:
    return bool(flag & PULL_FLAG_SUSPEND)


def has_subscription_flag(flag: int) -> bool:
    return bool(flag & PULL_FLAG_SUBSCRIPTION)


def has_class_filter_flag(flag: int) -> bool:
    return bool(flag & PULL_FLAG_CLASS_FILTER)


def has_lite_pull_flag(flag: int) -> bool:
    return bool(flag & PULL_FLAG_LITE_PULL_MESSAGE)
