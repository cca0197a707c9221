"""Slave Acting Master (classic master/slave, no controller): RocketMQ's broker.failover package.

- ``acting_master``: who the smallest live brokerId of the set is (NOTIFY_MIN_BROKER_ID_CHANGE,
  the member-group sync, broker heartbeats) and the special services that follow it;
- ``escape_bridge``: where the writes of those services go while this broker is not a master;
- ``pre_online``: BrokerPreOnlineService, a returning master taking the slave's offsets back.
"""
