"""A throwaway certificate authority for mutual-TLS tests (the ``openssl`` command, as
orbitmq.remoting.tls uses without the cryptography package)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class Pki:
    ca_cert: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    # Self-signed, so signed by no CA the servers trust.
    rogue_cert: str
    rogue_key: str


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command is needed (make test installs it)"
    subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)


def _signed(base: Path, name: str, cn: str, ca_cert: Path, ca_key: Path, extensions: str | None) -> tuple[str, str]:
    key, csr, cert = base / f"{name}.key", base / f"{name}.csr", base / f"{name}.crt"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={cn}")
    args = ["x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-sha256"]
    if extensions:
        ext = base / f"{name}.ext"
        ext.write_text(extensions + "\n", encoding="utf-8")
        args += ["-extfile", str(ext)]
    _openssl(*args)
    return str(cert), str(key)


def make_pki(base: Path) -> Pki:
    """A CA, a server pair for 127.0.0.1/localhost and a client pair signed by it, and a rogue
    self-signed client pair."""
    base.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = base / "ca.key", base / "ca.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_cert),
             "-days", "2", "-subj", "/CN=OrbitMQ test CA")
    server_cert, server_key = _signed(base, "server", "localhost", ca_cert, ca_key, SERVER_NAMES)
    client_cert, client_key = _signed(base, "client", "orbitmq-client", ca_cert, ca_key, None)
    rogue_key, rogue_cert = base / "rogue.key", base / "rogue.crt"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(rogue_key), "-out", str(rogue_cert),
             "-days", "2", "-subj", "/CN=orbitmq-client")
    return Pki(str(ca_cert), server_cert, server_key, client_cert, client_key, str(rogue_cert), str(rogue_key))
