"""What two proxies' answers to one gRPC request must share: the gRPC status code, for a server
stream the sequence of response kinds (status / message / delivery_timestamp / next_offset /
settings …), every response's structure (which fields are set, by name, recursively: a scalar by
its type, an enum by its value, so an ``apache.rocketmq.v2.Code`` or a ``MessageType`` compares
as itself), and the values a case names. Ids, receipt handles, times, addresses and the
``Status.message`` remark legitimately differ: their values are left out, their presence is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

# Fields left out of the structure altogether: a remark's wording is each side's own.
NOISE_FIELDS = {"apache.rocketmq.v2.Status": frozenset({"message"})}
# Well-known types compared as leaves (their seconds and nanos are times).
LEAVES = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})
# Response metadata either transport adds on its own, never part of the contract.
NOISE_METADATA = frozenset({"content-type", "date", "server", "user-agent", "grpc-accept-encoding",
                            "grpc-encoding", "accept-encoding"})


@dataclass(frozen=True)
class Answer:
    grpc_code: str  # grpc.StatusCode's name; OK for a call that ended normally
    details: str  # the gRPC status details (a refused call's only explanation)
    responses: list[Any] = field(default_factory=list)
    metadata: frozenset[str] = frozenset()  # initial and trailing metadata keys, noise left out

    @property
    def kinds(self) -> list[str]:
        """Each response's kind: its oneof's field (a stream's), else the message's name."""
        return [kind(r) for r in self.responses]

    @property
    def code(self) -> str | None:
        """The first ``status.code`` any response carries (apache.rocketmq.v2.Code's name)."""
        for r in self.responses:
            status = _status(r)
            if status is not None:
                return status
        return None

    @property
    def remark(self) -> str:
        """The first ``status.message``."""
        for r in self.responses:
            if "status" in r.DESCRIPTOR.fields_by_name and r.HasField("status"):
                return r.status.message
        return ""

    def values(self, path: str) -> list[Any]:
        return [v for r in self.responses for v in pick(r, path)]


def of_error(error: grpc.RpcError, responses: list[Any]) -> Answer:
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return Answer(code.name, details or "", responses, _metadata(error))


def of_call(call: Any, responses: list[Any]) -> Answer:
    return Answer("OK", "", responses, _metadata(call))


def _metadata(call: Any) -> frozenset[str]:
    keys: set[str] = set()
    for getter in ("initial_metadata", "trailing_metadata"):
        try:
            keys.update(k for k, _ in (getattr(call, getter)() or ()))
        except Exception:  # noqa: BLE001 -- a call that never started has none
            pass
    return frozenset(k for k in keys if k not in NOISE_METADATA and not k.startswith("grpc-"))


def kind(response: Message) -> str:
    oneofs = response.DESCRIPTOR.oneofs
    if oneofs:
        which = response.WhichOneof(oneofs[0].name)
        return which or "empty"
    return response.DESCRIPTOR.name


def _status(response: Message) -> str | None:
    if "status" in response.DESCRIPTOR.fields_by_name and response.HasField("status"):
        return _enum_name(response.status.DESCRIPTOR.fields_by_name["code"], response.status.code)
    return None


def _enum_name(fd: FieldDescriptor, number: int) -> str:
    value = fd.enum_type.values_by_number.get(number)
    return value.name if value is not None else str(number)


def shape(msg: Message, depth: int) -> Any:
    """The set fields of ``msg`` with their values' shapes, ``depth`` levels deep (below that a
    message is its type's name). A repeated field is the sorted set of its elements' shapes (order
    and count are values, compared only when named); a map, its keys with their values' types."""
    name = msg.DESCRIPTOR.full_name
    if name in LEAVES or depth <= 0:
        return msg.DESCRIPTOR.name
    skip = NOISE_FIELDS.get(name, frozenset())
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        if fd.name in skip:
            continue
        out[fd.name] = _field_shape(fd, value, depth - 1)
    for fd in msg.DESCRIPTOR.fields:
        # A number or enum without presence is "set" only when it is not 0: a queue offset of 0 is
        # a value, not a missing field. Such fields are always part of the structure.
        if fd.name not in out and fd.name not in skip and not fd.is_repeated and not fd.has_presence \
                and fd.type not in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES,
                                    FieldDescriptor.TYPE_MESSAGE):
            out[fd.name] = _scalar_shape(fd, getattr(msg, fd.name), depth - 1)
    return dict(sorted(out.items()))


def _field_shape(fd: FieldDescriptor, value: Any, depth: int) -> Any:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        value_fd = fd.message_type.fields_by_name["value"]
        return {str(k): _scalar_shape(value_fd, v, depth) for k, v in sorted(value.items())}
    if fd.is_repeated:
        shapes = {json.dumps(_scalar_shape(fd, v, depth), sort_keys=True) for v in value}
        return [json.loads(s) for s in sorted(shapes)]
    return _scalar_shape(fd, value, depth)


def _scalar_shape(fd: FieldDescriptor, value: Any, depth: int) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return shape(value, depth)
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return _enum_name(fd, value)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "bool"
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return "bytes"
    if fd.type == FieldDescriptor.TYPE_STRING:
        return "string"
    return "number"


def pick(msg: Any, path: str) -> list[Any]:
    """The values at a dotted ``path``: ``a.b`` a field, ``a[*]`` each element of a repeated field,
    ``a#`` a repeated field's length, ``a?`` whether a field is set; enums by name."""
    values: list[Any] = [msg]
    for part in path.split("."):
        nxt: list[Any] = []
        for v in values:
            if not isinstance(v, Message):
                continue
            name = part.rstrip("#?").removesuffix("[*]")
            fd = v.DESCRIPTOR.fields_by_name.get(name)
            if fd is None:
                continue
            if part.endswith("#"):
                nxt.append(len(getattr(v, name)))
            elif part.endswith("?"):
                nxt.append(v.HasField(name))
            elif part.endswith("[*]"):
                nxt.extend(getattr(v, name))
            elif fd.type == FieldDescriptor.TYPE_ENUM and not fd.is_repeated:
                nxt.append(_enum_name(fd, getattr(v, name)))
            else:
                nxt.append(getattr(v, name))
        values = nxt
    return [v if not isinstance(v, bytes) else v[:32] for v in values]


def runs(answer: Answer, depth: int) -> list[tuple[str, Any, int]]:
    """The responses as runs of (kind, shape, count): a stream of four alike messages is one run."""
    out: list[tuple[str, Any, int]] = []
    for r in answer.responses:
        item = (kind(r), shape(r, depth))
        if out and out[-1][:2] == item:
            out[-1] = (*item, out[-1][2] + 1)
        else:
            out.append((*item, 1))
    return out


def differences(apache: Answer, orbit: Answer, *, depth: int, values: tuple[str, ...] = (),
                count: bool = True) -> list[str]:
    """What differs, each as one short line; empty when the answers conform. ``count=False``
    compares a stream's runs without their lengths."""
    out: list[str] = []
    if "NOT_SENT" in (apache.grpc_code, orbit.grpc_code):  # what it needs from an earlier case is missing
        return [f"not sent: {apache.details[:80]!r} / {orbit.details[:80]!r}"]
    if apache.grpc_code != orbit.grpc_code:
        out.append(f"gRPC {apache.grpc_code} vs {orbit.grpc_code} "
                   f"(details: {apache.details[:80]!r} / {orbit.details[:80]!r})")
        return out
    if apache.code != orbit.code:
        out.append(f"Code {apache.code} vs {orbit.code} "
                   f"(messages: {apache.remark[:80]!r} / {orbit.remark[:80]!r})")
        return out  # the rest follows from the code
    a_runs, o_runs = runs(apache, depth), runs(orbit, depth)
    a_kinds = [(k, n if count else 1) for k, _, n in a_runs]
    o_kinds = [(k, n if count else 1) for k, _, n in o_runs]
    if a_kinds != o_kinds:
        out.append(f"responses {_kinds(a_kinds)} vs {_kinds(o_kinds)}")
    else:
        for (k, a_shape, _), (_, o_shape, _) in zip(a_runs, o_runs, strict=True):
            if a_shape != o_shape:
                out.append(f"{k} {_diff_shapes(a_shape, o_shape)}")
                break
    if apache.metadata != orbit.metadata:
        out.append(f"metadata only Apache {sorted(apache.metadata - orbit.metadata)}, "
                   f"only OrbitMQ {sorted(orbit.metadata - apache.metadata)}")
    for path in values:
        a, o = apache.values(path), orbit.values(path)
        if a != o:
            out.append(f"{path}: {a!r:.80} vs {o!r:.80}")
    return out


def _kinds(kinds: list[tuple[str, int]]) -> str:
    return "[" + ", ".join(k if n == 1 else f"{k}×{n}" for k, n in kinds) + "]"


def _diff_shapes(a: Any, b: Any, path: str = "$") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        if only_a or only_b:
            return f"{path}: fields only Apache {only_a}, only OrbitMQ {only_b}"
        for key in a:
            if a[key] != b[key]:
                return _diff_shapes(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 1:
        return _diff_shapes(a[0], b[0], f"{path}[*]")
    return f"{path}: {json.dumps(a, sort_keys=True)[:100]} vs {json.dumps(b, sort_keys=True)[:100]}"
