"""The PySpark data source "rocketmq" (``pip install 'orbitmq[spark]'``).

    from orbitmq.spark import register
    register(spark)
    df = spark.readStream.format("rocketmq").option("endpoints", "127.0.0.1:8081").option("topic", "A").load()

It talks to the Proxy through the SDK (QueryRoute, QueryOffset/GetOffset, PullMessage,
UpdateOffset, SendMessage); only ``topicPattern`` also asks the NameServers (``namesrvAddr``) for
the topic list, which the proxy's gRPC API does not offer. Options: docs/spark.md. Registration is explicit: pyspark 4.x discovers data sources only as
top-level modules named ``pyspark_*`` (``pyspark/sql/worker/lookup_data_sources.py``), not by
package metadata, and OrbitMQ installs nothing outside the ``orbitmq`` namespace.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(f"orbitmq.spark needs pyspark and pyarrow: pip install 'orbitmq[spark]' ({exc})") from exc

from orbitmq.spark.metrics import lag
from orbitmq.spark.options import RocketMQOptionError
from orbitmq.spark.source import SCHEMA, RocketMQDataSource


def register(spark) -> None:
    """Make ``format("rocketmq")`` available in ``spark``: a classic SparkSession or a Spark Connect
    one (``SparkSession.builder.remote(...)``, a Declarative Pipeline's ``spark``). From Connect the
    class is pickled, by reference to this module, to the server, whose Python workers (its
    PYSPARK_PYTHON) must have orbitmq installed (docs/spark.md)."""
    spark.dataSource.register(RocketMQDataSource)


__all__ = ["SCHEMA", "RocketMQDataSource", "RocketMQOptionError", "lag", "register"]
