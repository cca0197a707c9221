"""mqadmin's metadata export and import: exportMetadata, exportConfigs, updateTopicList and
updateSubGroupList, with upstream's names, flags and file names (metadata.json, topic.json,
subscriptionGroup.json, configs.json under -f, /tmp/rocketmq/export by default). Upstream files
the exports under org.apache.rocketmq.tools.command.export and the two batch updates under its
topic and consumer packages; they are here because they read back what the exports write.

What exportMetadata -t / -g writes, updateTopicList / updateSubGroupList read back: upstream's
import commands take a JSON *list* of configs; they also take the export's own tables here
(``{"topicConfigTable": {...}}``, ``{"subscriptionGroupTable": {...}}``), so a cluster's metadata
moves to another with the two commands and no editing in between.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import progress, write_file
from orbitmq.admin.registry import Result, UsageError, command
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig

DEFAULT_EXPORT_PATH = "/tmp/rocketmq/export"
# ExportConfigsCommand.needBrokerProprties: the broker keys configs.json keeps.
EXPORTED_BROKER_KEYS = ("brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime",
                        "filterServerNums", "flushDiskType", "maxMessageSize", "messageDelayLevel",
                        "msgTraceTopicName", "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
                        "autoCreateTopicEnable", "autoCreateSubscriptionGroup")


def _write_json(path: str, data: Any) -> str:
    return write_file(path, json.dumps(data, indent="\t", ensure_ascii=False).encode("utf-8"))


# ---- exportMetadata ----------------------------------------------------------------------------

def _export_metadata_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", dest="cluster", help="choose a cluster to export")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="choose a broker to export")
    p.add_argument("-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_PATH,
                   help=f"export metadata.json path | default {DEFAULT_EXPORT_PATH}")
    p.add_argument("-t", "--topic", dest="topics_only", action="store_true", help="only export topic metadata")
    p.add_argument("-g", "--subscriptionGroup", dest="groups_only", action="store_true",
                   help="only export subscriptionGroup metadata")
    p.add_argument("-s", "--specialTopic", dest="special_topic", action="store_true",
                   help="need retryTopic and dlqTopic")


@command("exportMetadata", "Export metadata.", _export_metadata_options)
async def export_metadata(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """User topics and subscription groups (not the brokers' own) of one broker (-b, with -t or
    -g) or of a cluster's masters (-c: a topic's queue numbers and a group's retry queues summed
    over the brokers that have it, as upstream)."""
    base = args.file_path.strip()
    if args.broker_addr:
        addr = args.broker_addr.strip()
        if args.topics_only:
            topics = await admin.user_topic_configs(addr, args.special_topic)
            data = {"topicConfigTable": {n: tc.to_json_dict() for n, tc in topics.items()}}
            path = _write_json(os.path.join(base, "topic.json"), data)
        elif args.groups_only:
            groups = await admin.user_subscription_groups(addr)
            data = {"subscriptionGroupTable": {n: g.to_json_dict() for n, g in groups.items()}}
            path = _write_json(os.path.join(base, "subscriptionGroup.json"), data)
        else:
            raise UsageError("with -b brokerAddr, give -t (topics) or -g (subscription groups)")
        return Result({"path": path, **data}, f"export {path} success")
    if not args.cluster:
        raise UsageError("one of -c clusterName or -b brokerAddr is required")
    topics: dict[str, TopicConfig] = {}
    groups: dict[str, SubscriptionGroupConfig] = {}
    masters = await admin.master_addrs(args.cluster.strip())
    for i, (name, addr) in enumerate(masters, 1):
        progress(f"[{i}/{len(masters)}] {name} {addr}")
        for topic, tc in (await admin.user_topic_configs(addr, args.special_topic)).items():
            seen = topics.get(topic)
            if seen is not None:
                tc.read_queue_nums += seen.read_queue_nums
                tc.write_queue_nums += seen.write_queue_nums
            topics[topic] = tc
        for group, g in (await admin.user_subscription_groups(addr)).items():
            seen_group = groups.get(group)
            if seen_group is not None:
                g.retry_queue_nums += seen_group.retry_queue_nums
            groups[group] = g
    data: dict[str, Any] = {}
    if not args.groups_only:
        data["topicConfigTable"] = {n: tc.to_json_dict() for n, tc in sorted(topics.items())}
    if not args.topics_only:
        data["subscriptionGroupTable"] = {n: g.to_json_dict() for n, g in sorted(groups.items())}
    data["exportTime"] = int(time.time() * 1000)
    name = "topic.json" if args.topics_only else "subscriptionGroup.json" if args.groups_only else "metadata.json"
    path = _write_json(os.path.join(base, name), data)
    return Result({"path": path, **data}, f"export {path} success")


# ---- exportConfigs -----------------------------------------------------------------------------

def _export_configs_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="choose a cluster to export")
    p.add_argument("-f", "--filePath", dest="file_path", default=DEFAULT_EXPORT_PATH,
                   help=f"export configs.json path | default {DEFAULT_EXPORT_PATH}")


@command("exportConfigs", "Export configs.", _export_configs_options)
async def export_configs(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """The cluster's scale (NameServers, masters, slaves) and each master's main broker keys."""
    cluster = args.cluster.strip()
    sets = await admin.cluster_broker_addrs(cluster, with_slaves=True)
    configs: dict[str, dict[str, str]] = {}
    slaves = 0
    masters = 0
    for name, master, slave_addrs in sets:
        if not master:  # a set without a master (failing over): upstream lists masters only
            continue
        masters += 1
        progress(f"getBrokerConfig {name} {master}")
        values = await admin.broker_config(master)
        configs[values.get("brokerName", name)] = {k: values[k] for k in EXPORTED_BROKER_KEYS if k in values}
        slaves += len(slave_addrs)
    data = {"brokerConfigs": configs,
            "clusterScale": {"namesrvSize": len(admin.namesrv_addrs), "masterBrokerSize": masters,
                             "slaveBrokerSize": slaves}}
    path = _write_json(os.path.join(args.file_path.strip(), "configs.json"), data)
    return Result({"path": path, **data}, f"export {path} success")


# ---- updateTopicList / updateSubGroupList ------------------------------------------------------

def _list_options(what: str):
    def configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"create {what} to which broker")
        p.add_argument("-c", "--clusterName", dest="cluster", help=f"create {what} to which cluster")
        p.add_argument("-f", "--filename", required=True,
                       help=f"Path to a file with the list of {what} configs in json format (or exportMetadata's table)")
    return configure


def _read_list(path: str, table_key: str) -> list[dict[str, Any]]:
    file = Path(path)
    if not file.exists():
        raise AdminError(f"the file path {path} does not exists")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdminError(f"{path} is not a JSON file: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get(table_key), dict):
        data = list(data[table_key].values())
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise AdminError(f"{path} holds neither a JSON list of configs nor an export's {table_key}")
    return data


async def _targets(admin: MQAdminExt, args: argparse.Namespace) -> list[str]:
    if args.broker_addr:
        return [args.broker_addr.strip()]
    if args.cluster:
        return [addr for _n, addr in await admin.master_addrs(args.cluster.strip())]
    raise UsageError("one of -b brokerAddr or -c clusterName is required")


@command("updateTopicList", "create or update topic in batch", _list_options("topic"))
async def update_topic_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    targets = await _targets(admin, args)
    try:
        configs = [TopicConfig.from_json_dict(d) for d in _read_list(args.filename.strip(), "topicConfigTable")]
    except (ValueError, TypeError) as exc:
        raise AdminError(f"{args.filename}: {exc}") from None
    if not configs:
        return Result({"brokers": [], "topics": []}, "")
    lines = []
    for addr in targets:
        await admin.update_topic_list(addr, configs)
        lines.append(f"submit batch of topic config to {addr} success, please check the result later.")
    return Result({"brokers": targets, "topics": [c.topic_name for c in configs]}, "\n".join(lines))


@command("updateSubGroupList", "Update or create subscription group in batch", _list_options("group"))
async def update_sub_group_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    targets = await _targets(admin, args)
    try:
        configs = [SubscriptionGroupConfig.from_json_dict(d)
                   for d in _read_list(args.filename.strip(), "subscriptionGroupTable")]
    except (ValueError, TypeError) as exc:
        raise AdminError(f"{args.filename}: {exc}") from None
    if not configs:
        return Result({"brokers": [], "groups": []}, "")
    lines = []
    for addr in targets:
        await admin.update_subscription_group_list(addr, configs)
        lines.append(f"submit batch of group config to {addr} success, please check the result later.")
    return Result({"brokers": targets, "groups": [c.group_name for c in configs]}, "\n".join(lines))
