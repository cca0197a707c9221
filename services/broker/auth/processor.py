"""AUTH_* admin requests 3001-3010 (upstream's AuthProcessor behind AdminBrokerProcessor).

Headers: ``username`` (user calls), ``filter`` (list users), ``subject`` (ACL calls),
``policyType``/``resource`` (delete ACL), ``subjectFilter``/``resourceFilter`` (list ACLs).
Bodies: UserInfo / AclInfo JSON with string enum names. A refused change answers SYSTEM_ERROR
with the reason, as upstream; every accepted change is persisted before the answer. A get of an
unknown user/ACL is SUCCESS with an empty body.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from orbitmq.auth.model import AuthError
from orbitmq.broker.auth.store import AuthStoreError, persist_both
from orbitmq.broker.processors.base import Fields, RequestError
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController


def _body(request: RemotingCommand) -> dict[str, Any]:
    try:
        obj = json.loads(request.body) if request.body else None
    except ValueError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"the request body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RequestError(ResponseCode.SYSTEM_ERROR, "the request body must be a JSON object")
    return obj


def _ok(request: RemotingCommand, payload: Any = None) -> RemotingCommand:
    body = b"" if payload is None else json.dumps(payload).encode()
    return request.response_to(ResponseCode.SUCCESS, None, body=body)


class AuthAdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    @property
    def store(self) -> Any:
        return self.broker.auth_store

    def register(self) -> None:
        for code, handler in ((RequestCode.AUTH_CREATE_USER, self.create_user),
                              (RequestCode.AUTH_UPDATE_USER, self.update_user),
                              (RequestCode.AUTH_DELETE_USER, self.delete_user),
                              (RequestCode.AUTH_GET_USER, self.get_user),
                              (RequestCode.AUTH_LIST_USER, self.list_user),
                              (RequestCode.AUTH_CREATE_ACL, self.create_acl),
                              (RequestCode.AUTH_UPDATE_ACL, self.update_acl),
                              (RequestCode.AUTH_DELETE_ACL, self.delete_acl),
                              (RequestCode.AUTH_GET_ACL, self.get_acl),
                              (RequestCode.AUTH_LIST_ACL, self.list_acl)):
            self.broker.register_processor(code, self._refusing_bad_input(handler))

    @staticmethod
    def _refusing_bad_input(handler: Any) -> Any:
        async def run(request: RemotingCommand, channel: Any) -> RemotingCommand:
            try:
                return await handler(request)
            except (AuthStoreError, AuthError, ValueError) as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        return run

    async def _changed(self) -> None:
        await persist_both(self.store)

    # ---- users ------------------------------------------------------------------------------

    async def create_user(self, request: RemotingCommand) -> RemotingCommand:
        info = _body(request)
        info.setdefault("username", Fields(request.ext_fields).str("username", required=False))
        self.store.create_user(info)
        await self._changed()
        return _ok(request)

    async def update_user(self, request: RemotingCommand) -> RemotingCommand:
        info = _body(request)
        info.setdefault("username", Fields(request.ext_fields).str("username", required=False))
        self.store.update_user(info)
        await self._changed()
        return _ok(request)

    async def delete_user(self, request: RemotingCommand) -> RemotingCommand:
        self.store.delete_user(Fields(request.ext_fields).str("username", required=False))
        await self._changed()
        return _ok(request)

    async def get_user(self, request: RemotingCommand) -> RemotingCommand:
        username = Fields(request.ext_fields).str("username", required=False)
        if not username.strip():
            raise AuthStoreError("username can not be blank")
        user = self.store.get_user(username)
        # An unknown user is SUCCESS with no body: the proxy's lookups tell "absent" from "failed".
        return _ok(request, None if user is None else user.to_json())

    async def list_user(self, request: RemotingCommand) -> RemotingCommand:
        text = Fields(request.ext_fields).str("filter", required=False)
        return _ok(request, [u.to_json() for u in self.store.list_users(text)])

    # ---- ACLs -------------------------------------------------------------------------------

    async def create_acl(self, request: RemotingCommand) -> RemotingCommand:
        info = _body(request)
        info.setdefault("subject", Fields(request.ext_fields).str("subject", required=False))
        self.store.create_acl(info)
        await self._changed()
        return _ok(request)

    async def update_acl(self, request: RemotingCommand) -> RemotingCommand:
        info = _body(request)
        info.setdefault("subject", Fields(request.ext_fields).str("subject", required=False))
        self.store.update_acl(info)
        await self._changed()
        return _ok(request)

    async def delete_acl(self, request: RemotingCommand) -> RemotingCommand:
        f = Fields(request.ext_fields)
        resources = f.str("resource", required=False).split(",")
        self.store.delete_acl(f.str("subject", required=False), f.opt_str("policyType"), resources)
        await self._changed()
        return _ok(request)

    async def get_acl(self, request: RemotingCommand) -> RemotingCommand:
        subject = Fields(request.ext_fields).str("subject", required=False)
        if not subject.strip():
            raise AuthStoreError("subject can not be blank")
        acl = self.store.get_acl(subject)
        return _ok(request, None if acl is None else acl.to_json())

    async def list_acl(self, request: RemotingCommand) -> RemotingCommand:
        f = Fields(request.ext_fields)
        acls = self.store.list_acls(f.str("subjectFilter", required=False), f.str("resourceFilter", required=False))
        return _ok(request, [a.to_json() for a in acls])
