"""`orbitmq admin grpcAdmin`: one call of the proxy's apache.rocketmq.v2.Admin gRPC service.

mqadmin has no gRPC commands; this one sends any of the sixteen Admin RPCs to a proxy
(``-p``, the gRPC port) with the request written in protobuf's JSON mapping (``-b``), signed
with --accessKey/--secretKey (ACL 2.0) and over TLS with --tls. It prints the response in the
same JSON mapping, and exits 1 with the Status when its code is not OK.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import grpc
from google.protobuf import json_format

from orbitmq.admin.admin_api import AdminError
from orbitmq.admin.registry import Result, UsageError, command, without_namesrv
from orbitmq.auth.signature import grpc_auth_headers
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb

SERVICE = apb.DESCRIPTOR.services_by_name["Admin"]
_OK = (pb.Code.OK, pb.Code.CODE_UNSPECIFIED)


def _options(p: argparse.ArgumentParser) -> None:
    names = ", ".join(m.name for m in SERVICE.methods)
    p.add_argument("-p", "--proxy", default="127.0.0.1:8081", help="the proxy's gRPC address (host:port)")
    p.add_argument("-m", "--method", required=True, help=f"the Admin RPC: {names}")
    p.add_argument("-b", "--body", default="{}",
                   help='the request in protobuf JSON, e.g. \'{"group": {"name": "G"}}\' (default {})')


def _to_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


@command("grpcAdmin", "Call an RPC of the proxy's apache.rocketmq.v2.Admin gRPC service", _options)
@without_namesrv
async def grpc_admin(_admin: Any, args: argparse.Namespace) -> Result:
    method = SERVICE.methods_by_name.get(args.method)
    if method is None:
        raise UsageError(f"unknown Admin RPC {args.method!r}: one of {', '.join(m.name for m in SERVICE.methods)}")
    request_cls = getattr(apb, method.input_type.name)
    response_cls = getattr(apb, method.output_type.name)
    try:
        request = json_format.Parse(args.body, request_cls())
    except json_format.ParseError as exc:
        raise UsageError(f"-b is not a {method.input_type.name} in protobuf JSON: {exc}") from None
    metadata = grpc_auth_headers(args.access_key, args.secret_key or "") if args.access_key else []
    channel = grpc.aio.secure_channel(args.proxy, grpc.ssl_channel_credentials()) if args.tls \
        else grpc.aio.insecure_channel(args.proxy)
    async with channel:
        call = channel.unary_unary(f"/{SERVICE.full_name}/{method.name}",
                                   request_serializer=request_cls.SerializeToString,
                                   response_deserializer=response_cls.FromString)
        try:
            response = await call(request, metadata=metadata, timeout=args.timeout)
        except grpc.aio.AioRpcError as exc:
            raise AdminError(f"proxy {args.proxy}: {exc.code().name} {exc.details() or ''}".strip()) from None
    data = _to_dict(response)
    if "status" in method.output_type.fields_by_name and response.status.code not in _OK:
        raise AdminError(f"{pb.Code.Name(response.status.code)} {response.status.message}".strip())
    return Result(data, json.dumps(data, indent=2, ensure_ascii=False))
