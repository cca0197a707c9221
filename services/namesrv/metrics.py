"""NameServer metrics (beyond upstream, whose NameServer exports none): how many brokers and
topics the route table holds, read at scrape time, labelled node_type="namesrv" and node_id (the
NameServer's address), plus metricsLabel pairs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from orbitmq.common import metrics as m


class NamesrvMetrics:
    def __init__(self, controller: Any) -> None:
        self.controller = controller
        extra = m.parse_metrics_label(controller.config.metrics_label)
        self.label_names = ("node_type", "node_id", *extra)
        self._extra = tuple(extra.values())

    def collect(self) -> Iterable[m.Metric]:
        common = ("namesrv", self.controller.address, *self._extra)
        routes = self.controller.route_info_manager
        up = m.gauge("rocketmq_namesrv_up", "1 while the NameServer runs.", self.label_names)
        up.add_metric(common, 1)
        brokers = m.gauge("rocketmq_namesrv_live_brokers", "Live broker registrations by cluster.",
                          self.label_names + ("cluster",))
        counts: dict[str, int] = {}
        for info in list(routes.broker_live_table):
            cluster = getattr(info, "cluster_name", "")
            counts[cluster] = counts.get(cluster, 0) + 1
        for cluster, count in sorted(counts.items()):
            brokers.add_metric((*common, cluster), count)
        topics = m.gauge("rocketmq_namesrv_topics", "Topics in the route table.", self.label_names)
        topics.add_metric(common, len(routes.topic_queue_table))
        return [up, brokers, topics]
