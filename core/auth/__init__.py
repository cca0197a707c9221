"""ACL 2.0 (RocketMQ 5.3): users, ACLs, request signatures and the allow/deny decision.

Shared by the proxy, broker, NameServer, controller and the clients; everything here is pure
(no I/O) so the gRPC SDK can import the signing functions without pulling in a server.
"""
