"""BrokerController.new_inner_message: born host parsing (cached) and the properties hand-over."""

from orbitmq.broker.controller import BrokerController, _parse_born_host


def _new(properties: dict[str, str], born_host: str = "10.0.0.7:5123", **kw):
    # new_inner_message reads nothing from the controller, so a bare instance is enough.
    broker = object.__new__(BrokerController)
    return broker.new_inner_message(topic="T", queue_id=1, body=b"x", flag=0, properties=properties,
                                    sys_flag=0, born_timestamp=1, born_host=born_host, reconsume_times=0, **kw)


def test_born_host_forms():
    assert _parse_born_host("10.0.0.7:5123") == ("10.0.0.7", 5123)
    assert _parse_born_host("[::1]:9876") == ("::1", 9876)
    assert _parse_born_host(":81") == ("127.0.0.1", 81)
    assert _parse_born_host("no-port") == ("127.0.0.1", 0)
    assert _parse_born_host("host:port") == ("127.0.0.1", 0)
    # The same channel address gives the same (immutable) tuple, parsed once.
    assert _parse_born_host("10.0.0.7:5123") is _parse_born_host("10.0.0.7:5123")


def test_properties_copied_by_default():
    props = {"TAGS": "a", "KEYS": "k"}
    inner = _new(props)
    assert inner.properties == props and inner.properties is not props
    assert inner.born_host == ("10.0.0.7", 5123)
    assert inner.properties_string == "TAGS\x01a\x02KEYS\x01k\x02"


def test_properties_handed_over_without_copy():
    props = {"TAGS": "a"}
    inner = _new(props, copy_properties=False)
    assert inner.properties is props
    assert inner.properties_string == "TAGS\x01a\x02"
    assert inner.tags_code == _new({"TAGS": "a"}).tags_code != 0
