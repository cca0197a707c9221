"""Client side of Remoting ACL: an RPC hook that signs every outgoing request (AclClientRPCHook)."""

from __future__ import annotations

from typing import Any

from orbitmq.auth.signature import sign_remoting_fields


class AclClientRPCHook:
    """Adds AccessKey and Signature to a request's ext fields just before it is sent."""

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def __call__(self, request: Any) -> None:
        sign_remoting_fields(request.ext_fields, request.body, self.access_key, self.secret_key,
                             self.security_token)


def install_signing(remoting_client: Any, credentials: tuple[str, str] | None) -> None:
    """Sign every request of ``remoting_client`` (a RemotingClient) with ``(accessKey, secretKey)``."""
    if credentials is not None:
        remoting_client.rpc_hook = AclClientRPCHook(*credentials)
