"""POP consumption on the broker: what the proxy's ReceiveMessage, AckMessage and
ChangeInvisibleDuration are built on (PopMessageProcessor and friends upstream)."""
