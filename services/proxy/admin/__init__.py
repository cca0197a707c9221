"""apache.rocketmq.v2.Admin on the proxy's gRPC port, beside MessagingService.

One module per family of RPCs (runtime, topics, subscriptions, accumulation, offsets, messages,
clients), each answering from the NameServers and brokers over Remoting through the proxy's
ClusterService, as mqadmin's equivalent command does; service.py is the servicer that routes
each RPC to its family and turns every failure into the response's Status.
"""
