"""Mutual-TLS keys (TlsSystemConfig): tls.server.need.client.auth and its partners, read into
ssl contexts for Remoting and into grpc credentials for the proxy."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from orbitmq import ClientConfig
from orbitmq.proxy.tls import client_auth_roots
from orbitmq.remoting.server_config import RemotingServerConfig
from orbitmq.remoting.tls import client_ssl_context, need_client_auth, server_ssl_context, tool_ssl_context
from tests.support.pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server(pki: Pki, **keys: object) -> SimpleNamespace:
    base = {"tls_server_mode": "enforcing", "tls_server_cert_path": pki.server_cert,
            "tls_server_key_path": pki.server_key, "tls_server_auth_client": True,
            "tls_server_trust_cert_path": pki.ca_cert}
    return SimpleNamespace(**{**base, **keys})


def test_the_keys_have_upstreams_names_and_defaults() -> None:
    config = RemotingServerConfig.from_mapping({"tls.server.need.client.auth": "require", "tls.server.authClient": "true",
                   "tls.server.trustCertPath": "/ca.pem", "tls.client.certPath": "/c.pem",
                   "tls.client.keyPath": "/c.key", "tls.client.keyPassword": "pw", "tls.server.keyPassword": "spw"})
    assert (config.tls_server_need_client_auth, config.tls_server_auth_client) == ("require", True)
    assert (config.tls_server_trust_cert_path, config.tls_client_cert_path) == ("/ca.pem", "/c.pem")
    assert (config.tls_client_key_path, config.tls_client_key_password, config.tls_server_key_password) == (
        "/c.key", "pw", "spw")
    assert need_client_auth(RemotingServerConfig()) == "none"


@pytest.mark.parametrize("value", ["none", "NONE", " None ", ""])
def test_none_asks_for_nothing(value: str) -> None:
    assert need_client_auth(SimpleNamespace(tls_server_need_client_auth=value)) == "none"


def test_values_upstream_would_silently_read_as_none_are_refused() -> None:
    with pytest.raises(ValueError, match="is not one of none, optional, require"):
        need_client_auth(SimpleNamespace(tls_server_need_client_auth="sometimes"))


@pytest.mark.parametrize("value", ["optional", "require"])
def test_asking_without_verifying_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="needs tls.server.authClient=true"):
        need_client_auth(SimpleNamespace(tls_server_need_client_auth=value, tls_server_auth_client=False))


def test_a_bad_value_stops_the_server_even_with_tls_off() -> None:
    with pytest.raises(ValueError):
        server_ssl_context(SimpleNamespace(tls_server_mode="disabled", tls_server_need_client_auth="maybe"))


@pytest.mark.parametrize(("value", "mode"), [("none", ssl.CERT_NONE), ("optional", ssl.CERT_OPTIONAL),
                                             ("require", ssl.CERT_REQUIRED)])
def test_server_context_verify_modes(pki: Pki, value: str, mode: ssl.VerifyMode) -> None:
    ctx = server_ssl_context(_server(pki, tls_server_need_client_auth=value))
    assert ctx is not None and ctx.verify_mode == mode
    if value != "none":  # the trusted CA is loaded, and only it
        assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "OrbitMQ test CA"),),)]


def test_an_encrypted_key_with_its_password(pki: Pki, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    assert openssl
    encrypted = tmp_path / "server-enc.key"
    subprocess.run([openssl, "pkey", "-in", pki.server_key, "-aes256", "-passout", "pass:s3cret",
                    "-out", str(encrypted)], check=True, capture_output=True)
    assert server_ssl_context(_server(pki, tls_server_key_path=str(encrypted), tls_server_key_password="s3cret"))
    with pytest.raises(ssl.SSLError):
        server_ssl_context(_server(pki, tls_server_key_path=str(encrypted), tls_server_key_password="wrong"))


def test_client_certificate_needs_its_key(pki: Pki) -> None:
    with pytest.raises(ValueError, match="go together"):
        client_ssl_context(SimpleNamespace(tls_enable=True, tls_client_cert_path=pki.client_cert))
    ctx = client_ssl_context(SimpleNamespace(tls_enable=True, tls_client_cert_path=pki.client_cert,
                                             tls_client_key_path=pki.client_key))
    assert ctx is not None


def test_proxy_grpc_roots(pki: Pki) -> None:
    assert client_auth_roots(SimpleNamespace(tls_server_need_client_auth="none")) is None
    roots = client_auth_roots(_server(pki, tls_server_need_client_auth="require"))
    assert roots == Path(pki.ca_cert).read_bytes()
    with pytest.raises(ValueError, match="optional is not available"):
        client_auth_roots(_server(pki, tls_server_need_client_auth="optional"))
    with pytest.raises(ValueError, match="needs tls.server.trustCertPath"):
        client_auth_roots(_server(pki, tls_server_need_client_auth="require", tls_server_trust_cert_path=""))


def test_sdk_client_certificate_options() -> None:
    with pytest.raises(ValueError, match="go together"):
        ClientConfig("127.0.0.1:8081", cert_file="/c.pem")
    config = ClientConfig("127.0.0.1:8081", cert_file="/c.pem", key_file="/c.key")
    assert config.tls


def test_tools_read_tls_client_keys_from_upstreams_tls_config_file(pki: Pki, tmp_path: Path) -> None:
    assert tool_ssl_context(False, "/nonexistent") is None  # TLS off: the file is not read
    props = tmp_path / "tls.properties"
    props.write_text(f"tls.client.authServer=true\ntls.client.trustCertPath={pki.ca_cert}\n", encoding="utf-8")
    ctx = tool_ssl_context(True, str(props))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED
    props.write_text(f"tls.client.certPath={pki.client_cert}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="go together"):
        tool_ssl_context(True, str(props))
