"""Transactional messages (RocketMQ's TransactionalMessageService family).

- ``bridge``: half-message rewrite to RMQ_SYS_TRANS_HALF_TOPIC, commit restore, check copies;
- ``op_codec``: op-message bodies in RMQ_SYS_TRANS_OP_HALF_TOPIC (old and 5.1+ forms);
- ``service``: which half messages are still open, END_TRANSACTION's commit/rollback, ops;
- ``end_transaction``: the END_TRANSACTION (37) processor;
- ``check``: the check scan (CHECK_TRANSACTION_STATE (39) to the producer group, discards).
"""
