"""RocketMQ-style key=value configuration loading."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

import pytest

from orbitmq.common.config import (
    ConfigBase,
    load_configs,
    load_properties,
    parse_cli_overrides,
    snake_to_camel,
)


class FlushDiskType(enum.Enum):
    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


@dataclass
class SampleBrokerConfig(ConfigBase):
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    auto_create_topic_enable: bool = True
    disk_max_used_space_ratio: float = 75.0
    namesrv_addr: str | None = None
    rocketmq_home: str = field(default="/opt/rocketmq", metadata={"key": "rocketmqHome"})
    listen_port: int = field(default=10911, metadata={"key": "listenPort"})
    accept_hosts: list[str] = field(default_factory=list)


@dataclass
class SampleStoreConfig(ConfigBase):
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    message_delay_level: str = "1s 5s 10s"


def _write(tmp_path, text: str):
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return path


def test_snake_to_camel():
    assert snake_to_camel("broker_cluster_name") == "brokerClusterName"
    assert snake_to_camel("mapped_file_size_commit_log") == "mappedFileSizeCommitLog"
    assert snake_to_camel("listen") == "listen"
    assert SampleBrokerConfig.config_keys() >= {"brokerClusterName", "rocketmqHome", "acceptHosts"}


def test_load_properties_syntax(tmp_path):
    path = _write(
        tmp_path,
        "# comment\n\n! also a comment\n  brokerClusterName = ClusterA  \nbrokerId=1\n"
        "namesrvAddr=127.0.0.1:9876;127.0.0.2:9876\nmessageDelayLevel=1s 5s\nemptyValue=\n",
    )
    assert load_properties(path) == {
        "brokerClusterName": "ClusterA",
        "brokerId": "1",
        "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876",
        "messageDelayLevel": "1s 5s",
        "emptyValue": "",
    }


def test_load_properties_bad_line(tmp_path):
    path = _write(tmp_path, "brokerId=1\nthis line has no separator\n")
    with pytest.raises(ValueError, match=r"broker\.conf:2: expected key=value"):
        load_properties(path)


def test_coercion_and_camel_case_mapping(tmp_path):
    path = _write(
        tmp_path,
        "brokerClusterName=C1\nbrokerId=2\nautoCreateTopicEnable=FALSE\ndiskMaxUsedSpaceRatio=88.5\n"
        "rocketmqHome=/srv/rmq\nlistenPort=30911\nacceptHosts=a, b,c\n"
        "mappedFileSizeCommitLog=4096\nflushDiskType=SYNC_FLUSH\n",
    )
    broker, store = load_configs(path, {}, SampleBrokerConfig, SampleStoreConfig)
    assert broker == SampleBrokerConfig(
        broker_cluster_name="C1",
        broker_id=2,
        auto_create_topic_enable=False,
        disk_max_used_space_ratio=88.5,
        namesrv_addr=None,
        rocketmq_home="/srv/rmq",
        listen_port=30911,
        accept_hosts=["a", "b", "c"],
    )
    assert store.mapped_file_size_commit_log == 4096
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert store.message_delay_level == "1s 5s 10s"  # untouched default


def test_defaults_without_file():
    (broker,) = load_configs(None, None, SampleBrokerConfig)
    assert broker == SampleBrokerConfig()


def test_overrides_win(tmp_path):
    path = _write(tmp_path, "brokerId=1\nbrokerClusterName=FromFile\n")
    overrides = parse_cli_overrides(["brokerId=3", "--flushDiskType=sync_flush"])
    broker, store = load_configs(path, overrides, SampleBrokerConfig, SampleStoreConfig)
    assert broker.broker_id == 3 and broker.broker_cluster_name == "FromFile"
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH


def test_unknown_keys_are_reported(tmp_path, caplog):
    path = _write(tmp_path, "brokerId=1\nbrokerNmae=typo\n")
    with caplog.at_level(logging.WARNING, logger="orbitmq.common.config"):
        result = load_configs(path, {"zzzUnknown": "1"}, SampleBrokerConfig, SampleStoreConfig)
    assert result.unknown_keys == ("brokerNmae", "zzzUnknown")
    assert "brokerNmae" in caplog.text and "zzzUnknown" in caplog.text
    broker, store = result
    assert broker.broker_id == 1


@pytest.mark.parametrize(
    "key, value",
    [
        ("brokerId", "one"),
        ("autoCreateTopicEnable", "yes"),
        ("diskMaxUsedSpaceRatio", "lots"),
        ("flushDiskType", "FLUSH_SOMETIMES"),
    ],
)
def test_bad_values_raise_naming_key(key, value):
    with pytest.raises(ValueError) as info:
        load_configs(None, {key: value}, SampleBrokerConfig, SampleStoreConfig)
    assert key in str(info.value) and repr(value) in str(info.value)


def test_parse_cli_overrides():
    assert parse_cli_overrides(["a=1", "--b=x=y", " c = 2 "]) == {"a": "1", "b": "x=y", "c": "2"}
    with pytest.raises(ValueError, match="key=value"):
        parse_cli_overrides(["novalue"])
    with pytest.raises(ValueError, match="key=value"):
        parse_cli_overrides(["=1"])


def test_to_properties_roundtrip(tmp_path):
    broker = SampleBrokerConfig(broker_id=5, auto_create_topic_enable=False, accept_hosts=["h1", "h2"])
    store = SampleStoreConfig(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    text = broker.to_properties() + store.to_properties()
    assert "brokerId=5\n" in text and "autoCreateTopicEnable=false\n" in text
    assert "flushDiskType=SYNC_FLUSH\n" in text and "rocketmqHome=/opt/rocketmq\n" in text
    path = _write(tmp_path, text)
    result = load_configs(path, {}, SampleBrokerConfig, SampleStoreConfig)
    assert tuple(result) == (broker, store)
    assert result.unknown_keys == ()


def test_non_config_class_rejected():
    with pytest.raises(TypeError):
        load_configs(None, {}, dict)


def test_startup_argument_helpers(tmp_path, capsys):
    import argparse

    from orbitmq.common.config import add_config_arguments, format_configs, parse_args_with_overrides

    path = _write(tmp_path, "brokerId=1\n")
    parser = argparse.ArgumentParser(prog="mqbroker")
    add_config_arguments(parser)
    args, overrides = parse_args_with_overrides(
        parser, ["-c", str(path), "-p", "--brokerId=4", "listenPort=1"]
    )
    assert args.config_file == str(path) and args.print_config is True
    assert overrides == {"brokerId": "4", "listenPort": "1"}
    broker, store = load_configs(args.config_file, overrides, SampleBrokerConfig, SampleStoreConfig)
    assert (broker.broker_id, broker.listen_port) == (4, 1)
    listing = format_configs(broker, store)
    assert "brokerId=4\n" in listing and "flushDiskType=ASYNC_FLUSH\n" in listing
    with pytest.raises(SystemExit):
        parse_args_with_overrides(parser, ["stray"])
    assert "key=value" in capsys.readouterr().err
