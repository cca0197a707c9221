"""The proxy's Remoting port (RIP-55): RocketMQ 4.x/5.x Remoting clients served through the proxy."""
