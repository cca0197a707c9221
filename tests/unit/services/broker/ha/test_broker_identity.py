"""The persistent broker id files of controller mode (ReplicasManager#register: BrokerMetadata, TempBrokerMetadata) and the start-up refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.ha.broker_identity import (
    BrokerIdentityError,
    BrokerIdentityStore,
    register_check_code,
)
from orbitmq.broker.store.config import MessageStoreConfig
from tests.support.services import broker_conf


def _store(tmp_path: Path, cluster: str = "C1", name: str = "b1") -> BrokerIdentityStore:
    return BrokerIdentityStore(str(tmp_path / "brokerIdentity"), cluster, name)


def test_fresh_store_has_no_identity(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.load_broker_id() is None
    assert store.load_temp() is None


def test_temp_then_final_file_layout(tmp_path: Path) -> None:
    store = _store(tmp_path)
    code = register_check_code("127.0.0.1:10911", 1700000000000)
    assert code == "127.0.0.1:10911;1700000000000"
    store.write_temp(3, code)
    assert (tmp_path / "brokerIdentity-temp").read_text() == "C1#b1#3#127.0.0.1:10911;1700000000000"
    temp = store.load_temp()
    assert temp is not None and (temp.broker_id, temp.register_check_code) == (3, code)
    assert store.load_broker_id() is None  # applied but not confirmed: only the temp file

    store.write_broker_id(3)
    assert (tmp_path / "brokerIdentity").read_text() == "C1#b1#3"
    assert not (tmp_path / "brokerIdentity-temp").exists()
    assert store.load_broker_id() == 3
    assert store.load_temp() is None


def test_rewrite_keeps_bak_and_bak_is_used_when_main_missing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.write_broker_id(2)
    store.write_broker_id(5)
    assert (tmp_path / "brokerIdentity.bak").read_text() == "C1#b1#2"
    (tmp_path / "brokerIdentity").unlink()
    assert store.load_broker_id() == 2


@pytest.mark.parametrize(("content", "message"), [
    ("C9#b1#2", "cluster='C9'"),
    ("C1#other#2", "brokerName='other'"),
    ("C1#b1", "malformed"),
    ("C1#b1#x", "not a number"),
    ("C1#b1#0", "must be >= 1"),
    ("", "empty"),
])
def test_bad_identity_file_is_refused_with_file_and_reason(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "brokerIdentity").write_text(content)
    with pytest.raises(BrokerIdentityError) as info:
        _store(tmp_path).load_broker_id()
    assert str(tmp_path / "brokerIdentity") in str(info.value)
    assert message in str(info.value)


def test_foreign_temp_file_is_refused_and_empty_one_discarded(tmp_path: Path) -> None:
    (tmp_path / "brokerIdentity-temp").write_text("C1#b2#1#127.0.0.1:1;5")
    with pytest.raises(BrokerIdentityError, match="brokerIdentity-temp"):
        _store(tmp_path).load_temp()
    (tmp_path / "brokerIdentity-temp").write_text("")
    assert _store(tmp_path).load_temp() is None
    assert not (tmp_path / "brokerIdentity-temp").exists()


def _controller_mode_broker(root: Path, **extra: str) -> BrokerController:
    values = broker_conf(0, root, brokerClusterName="C1", brokerName="b1", enableControllerMode="true",
                         controllerAddr="127.0.0.1:1", mappedFileSizeCommitLog=1024 * 1024, **extra)
    return BrokerController(BrokerConfig.from_mapping(values), MessageStoreConfig.from_mapping(values),
                            listen_host="127.0.0.1")


async def test_broker_refuses_to_start_with_a_foreign_identity_file(tmp_path: Path) -> None:
    (tmp_path / "brokerIdentity").write_text("OtherCluster#b1#1")
    broker = _controller_mode_broker(tmp_path)
    with pytest.raises(BrokerIdentityError) as info:
        await broker.start()
    await broker.abort_start()
    assert "OtherCluster" in str(info.value) and str(tmp_path / "brokerIdentity") in str(info.value)


async def test_broker_identity_path_is_configurable(tmp_path: Path) -> None:
    custom = tmp_path / "ids" / "me"
    custom.parent.mkdir()
    custom.write_text("C1#wrong#1")
    broker = _controller_mode_broker(tmp_path, storePathBrokerIdentity=str(custom))
    with pytest.raises(BrokerIdentityError, match=str(custom)):
        await broker.start()
    await broker.abort_start()


async def test_controller_mode_with_dledger_commitlog_refuses_to_start(tmp_path: Path) -> None:
    broker = _controller_mode_broker(tmp_path, enableDLegerCommitLog="true")
    with pytest.raises(ValueError, match="enableControllerMode and enableDLegerCommitLog"):
        await broker.start()
    await broker.abort_start()
