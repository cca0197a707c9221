"""Fixtures of the Spark tests: one cluster (NameServer, broker, two proxies) and ONE Spark session.

Both are session-scoped: a SparkSession costs seconds to start (a JVM), a cluster too. The broker
has small CommitLog segments and a retention that deletes nothing until a test asks (the
failOnDataLoss tests force it), like tests/admin/test_admin_ops.py. Tests use topic, group
and checkpoint names of their own.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

pyspark = pytest.importorskip("pyspark", reason="the Spark tests need the extra: pip install -e '.[spark]'")

from tests.interop.harness import Cluster, start_cluster  # noqa: E402

SEGMENT = 4 * 1024 * 1024  # CommitLog segment: small, so retention has whole files to delete


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    not_now = (time.localtime().tm_hour + 12) % 24
    c = start_cluster(tmp_path_factory.mktemp("spark-cluster"), proxies=2, broker_extra={
        "mappedFileSizeCommitLog": str(SEGMENT), "cleanResourceInterval": "200", "deleteWhen": f"{not_now:02d}",
        "diskMaxUsedSpaceRatio": "99", "fileReservedTime": "72"})
    try:
        c.create_group("orbitmq-spark-source")  # the group plain reads pull with
        yield c
    except BaseException:
        print("\n===== service logs =====\n" + c.runner.report(), file=sys.stderr)
        raise
    finally:
        c.runner.stop_all()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("the Spark tests need Java 17 (java on the PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    from orbitmq.spark import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("orbitmq-spark-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.streaming.stopTimeout", "30s")
               .config("spark.driver.memory", "1g")
               .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"
