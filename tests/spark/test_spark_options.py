"""The option checks and the admission-control split, without Spark or a cluster."""

from __future__ import annotations

import pytest

from orbitmq.spark.options import RocketMQOptionError, parse_read, parse_write, split_limit

EP = {"endpoints": "127.0.0.1:8081", "topic": "A,B"}


def test_split_limit_is_proportional_to_backlog_and_exact() -> None:
    assert split_limit(100, {"q0": 300, "q1": 100, "q2": 0}) == {"q0": 75, "q1": 25, "q2": 0}
    assert split_limit(10, {"a": 5, "b": 2}) == {"a": 5, "b": 2}  # less than the limit: everything
    shares = split_limit(7, {"a": 1, "b": 1, "c": 1, "d": 100})
    assert sum(shares.values()) == 7 and all(shares[k] <= b for k, b in {"a": 1, "b": 1, "c": 1, "d": 100}.items())
    assert sum(split_limit(1, {i: 3 for i in range(10)}).values()) == 1  # always progress


def test_read_options() -> None:
    ro = parse_read({**EP, "startingOffsets": '{"A": {"broker-a": {"0": 5, "1": -2}}}',
                     "maxMessagesPerTrigger": "10", "consumerGroup": "G", "failOnDataLoss": "false"}, True)
    assert ro.topics == ["A", "B"] and ro.starting == {"A": {"broker-a": {"0": 5, "1": -2}}}
    assert ro.max_messages_per_trigger == 10 and ro.consumer_group == "G" and not ro.fail_on_data_loss
    assert parse_read(EP, True).starting == "latest" and parse_read(EP, False).starting == "earliest"
    assert parse_read({**EP, "ENDINGOFFSETS": "latest"}, False).ending == "latest"  # case-insensitive


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({"topic": "A"}, True, "option endpoints is required"),
    ({"endpoints": "nohost", "topic": "A"}, True, "option endpoints: bad endpoint 'nohost'"),
    ({"endpoints": "h:1"}, False, "option topic is required"),
    ({**EP, "subscribe": "A"}, True, "unknown option 'subscribe'"),
    ({**EP, "endingOffsets": "latest"}, True, "endingoffsets does not apply to a streaming read"),
    ({**EP, "consumerGroup": "G"}, False, "consumergroup does not apply to a batch read"),
    ({**EP, "startingOffsets": "{not json"}, True, "option startingOffsets is neither"),
    ({**EP, "startingOffsets": '{"C": {}}'}, True, "names topic 'C', which is not in option topic"),
    ({**EP, "startingOffsets": '{"A": {"b": {"0": -3}}}'}, True, "must be an integer >= -2"),
    ({**EP, "endingOffsets": '{"A": {"b": {"0": -2}}}'}, False, "must be an integer >= -1"),
    ({**EP, "startingOffsets": "earliest", "startingTimestamp": "1"}, True, "exclude each other"),
    ({**EP, "maxMessagesPerTrigger": "ten"}, True, "option maxMessagesPerTrigger must be an integer"),
    ({**EP, "accessKey": "ak"}, True, "accessKey and secretKey must be given together"),
    ({**EP, "tls": "yes"}, True, "option tls must be true or false"),
    ({**EP, "tlsCertFile": "/c.pem"}, True, "tlsCertFile and tlsKeyFile must be given together"),
    ({**EP, "tlsCaFile": " "}, False, "option tlsCaFile is blank"),
    ({**EP, "tls": "false", "tlsCaFile": "/ca.pem"}, True, "need TLS"),
])
def test_bad_read_options(options: dict, streaming: bool, message: str) -> None:
    with pytest.raises(RocketMQOptionError, match=".*") as info:
        parse_read(options, streaming)
    assert message in str(info.value)


def test_write_options() -> None:
    wo = parse_write({"endpoints": "h:1", "topic": "B", "deterministicMessageIds": "true"})
    assert wo.topic == "B" and wo.deterministic_message_ids
    with pytest.raises(RocketMQOptionError, match="names one topic"):
        parse_write({"endpoints": "h:1", "topic": "A,B"})
    with pytest.raises(RocketMQOptionError, match="unknown option 'startingoffsets'"):
        parse_write({"endpoints": "h:1", "startingOffsets": "earliest"})


def test_tls_file_options_reach_the_client_config() -> None:
    conn = parse_write({"endpoints": "h:1", "TLSCAFILE": "/ca.pem", "tlsCertFile": "/c.pem", "tlsKeyFile": "/c.key"}).conn
    config = conn.client_config()
    assert config.tls and (config.ca_file, config.cert_file, config.key_file) == ("/ca.pem", "/c.pem", "/c.key")
    assert conn.key() != parse_write({"endpoints": "h:1", "tls": "true"}).conn.key()  # clients are not shared
    assert not parse_read(EP, True).conn.client_config().tls
