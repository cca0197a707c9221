"""Differential conformance (issue 24, part 3): the same Remoting requests to Apache RocketMQ and
to OrbitMQ, their answers compared after normalising what legitimately differs.

``corpus.py`` holds the requests (the project's own), ``compare.py`` the normalisation and the
comparison, ``run.py`` starts both systems and prints the table of differences
(``make compat``); tests/compat/test_conformance.py runs it in ``make test`` and requires every
difference to be a recorded deliberate deviation (``corpus.DEVIATIONS``, docs/compatibility.md).

The gRPC half: ``grpc_corpus.py`` (every apache.rocketmq.v2.MessagingService RPC, good and bad
requests), ``grpc_compare.py``, ``grpc_run.py`` (both NameServers, brokers and proxies;
``make compat`` runs it after ``run.py``), tests/compat/test_grpc_conformance.py, deviations in
``grpc_corpus.DEVIATIONS``.
"""
