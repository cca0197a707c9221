"""`orbitmq admin`'s commands, one module per package of upstream's mqadmin
(org.apache.rocketmq.tools.command.<package>): topic, consumer, offset, message, cluster, broker,
namesrv, connection, producer, queue, stats, export, auth, controller and ha; trace holds
message's queryMsgTraceById with the trace records sendMessage -m writes.

Importing a module registers its commands in ``orbitmq.admin.registry.COMMANDS``; cli.py
imports them all. Nothing here imports them, so each module imports on its own.
"""
