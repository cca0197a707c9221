"""Wire compatibility of proto/ with rocketmq-apis HEAD and the official Python client.

proto/ must be descriptor-identical to the newest rocketmq-apis protos, pinned (unmodified, with
their commit) under tests/unit/proto/rocketmq_apis and compiled here by grpc_tools; the official
Python client's copy, older, must be a subset of it. Descriptor sets are compared as plain
FileDescriptorProtos, read in subprocesses and never added to a pool here.

Assumes `make proto` has generated orbitmq.proto (the Makefile's test target does that).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

FDP = descriptor_pb2.FileDescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto

OFFICIAL_MODULES = [f"rocketmq.grpc_protocol.{n}_pb2" for n in ("definition", "service", "admin")]
OUR_MODULES = [f"orbitmq.proto.apache.rocketmq.v2.{n}_pb2" for n in ("definition", "service", "admin")]

# Prints {file name: base64(serialized FileDescriptorProto)} for the modules named in argv.
_DUMP_SCRIPT = """
import base64, importlib, json, sys
out = {}
for name in sys.argv[1:]:
    d = importlib.import_module(name).DESCRIPTOR
    out[d.name] = base64.b64encode(d.serialized_pb).decode()
print(json.dumps(out))
"""


def _load_files(modules: list[str]) -> dict[str, FDP]:
    proc = subprocess.run(
        [sys.executable, "-c", _DUMP_SCRIPT, *modules], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, f"loading {modules} failed (did `make proto` run?):\n{proc.stderr}"
    return {name: FDP.FromString(base64.b64decode(blob)) for name, blob in json.loads(proc.stdout).items()}


# rocketmq-apis at the commit named in rocketmq_apis/README.md.
PINNED_ROOT = Path(__file__).parent / "rocketmq_apis"
PINNED_DIR = "apache/rocketmq/v2"


def _drop_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    """--descriptor_set_out fills json_name, which the descriptors embedded in generated
    modules leave out; it is derived from the field name, so dropping it loses nothing."""
    for field in message.field:
        field.ClearField("json_name")
    for nested in message.nested_type:
        _drop_json_names(nested)


def _compile_pinned(out: Path) -> dict[str, FDP]:
    """Compiles the pinned upstream protos; file names lose upstream's directory prefix, the
    layout proto/ and the official client use, so the two sets compare file by file."""
    from grpc_tools import protoc

    sources = sorted(f"{PINNED_DIR}/{p.name}" for p in (PINNED_ROOT / PINNED_DIR).glob("*.proto"))
    code = protoc.main([
        "grpc_tools.protoc", f"-I{PINNED_ROOT}", f"-I{resources.files('grpc_tools') / '_proto'}",
        f"--descriptor_set_out={out}", *sources,
    ])
    assert code == 0, f"protoc failed on the pinned rocketmq-apis protos ({code})"
    files = {}
    for fdp in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        for message in fdp.message_type:
            _drop_json_names(message)
        fdp.name = fdp.name.removeprefix(PINNED_DIR + "/")
        deps = [d.removeprefix(PINNED_DIR + "/") for d in fdp.dependency]
        del fdp.dependency[:]
        fdp.dependency.extend(deps)
        files[fdp.name] = fdp
    return files


@pytest.fixture(scope="module")
def official() -> dict[str, FDP]:
    return _load_files(OFFICIAL_MODULES)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FDP]:
    return _compile_pinned(tmp_path_factory.mktemp("rocketmq-apis") / "head.pb")


@pytest.fixture(scope="module")
def ours() -> dict[str, FDP]:
    return _load_files(OUR_MODULES)


# --- the comparer ---------------------------------------------------------------------------


def _message_facts(
    file: str, scope: str, message: descriptor_pb2.DescriptorProto, facts: dict[str, object]
) -> None:
    name = f"{scope}.{message.name}"
    facts[f"message {name}"] = {"file": file, "map_entry": message.options.map_entry}
    oneofs = [o.name for o in message.oneof_decl]
    for oneof in oneofs:
        facts[f"oneof {name}.{oneof}"] = {"file": file}
    for field in message.field:
        facts[f"field {name}.{field.name}"] = {
            "number": field.number,
            "type": FieldProto.Type.Name(field.type),
            "label": FieldProto.Label.Name(field.label),
            "type_name": field.type_name,
            "oneof": oneofs[field.oneof_index] if field.HasField("oneof_index") else None,
            "proto3_optional": field.proto3_optional,
            "extendee": field.extendee,
        }
    for nested in message.nested_type:
        _message_facts(file, name, nested, facts)
    for enum in message.enum_type:
        _enum_facts(file, name, enum, facts)


def _enum_facts(
    file: str, scope: str, enum: descriptor_pb2.EnumDescriptorProto, facts: dict[str, object]
) -> None:
    name = f"{scope}.{enum.name}"
    facts[f"enum {name}"] = {"file": file}
    for value in enum.value:
        facts[f"enum value {name}.{value.name}"] = {"number": value.number}


def api_facts(files: Iterable[FDP]) -> dict[str, object]:
    """Flattens descriptors into {symbol: attributes} covering everything the wire depends on."""
    facts: dict[str, object] = {}
    for file in files:
        scope = f".{file.package}" if file.package else ""
        facts[f"file {file.name}"] = {"package": file.package, "syntax": file.syntax}
        for message in file.message_type:
            _message_facts(file.name, scope, message, facts)
        for enum in file.enum_type:
            _enum_facts(file.name, scope, enum, facts)
        for ext in file.extension:
            facts[f"extension {scope}.{ext.name}"] = {"number": ext.number, "extendee": ext.extendee}
        for service in file.service:
            facts[f"service {scope}.{service.name}"] = {"file": file.name}
            for method in service.method:
                facts[f"rpc {scope}.{service.name}.{method.name}"] = {
                    "input_type": method.input_type,
                    "output_type": method.output_type,
                    "client_streaming": method.client_streaming,
                    "server_streaming": method.server_streaming,
                }
    return facts


def api_differences(ours: Iterable[FDP], official: Iterable[FDP]) -> list[str]:
    """Every difference between two descriptor sets, in both directions; empty means compatible."""
    mine, theirs = api_facts(ours), api_facts(official)
    problems = [f"missing in ours: {key}" for key in sorted(theirs.keys() - mine.keys())]
    problems += [f"extra in ours: {key}" for key in sorted(mine.keys() - theirs.keys())]
    for key in sorted(mine.keys() & theirs.keys()):
        if mine[key] != theirs[key]:
            problems.append(f"differs: {key}: ours {mine[key]} != official {theirs[key]}")
    return problems


# --- compatibility --------------------------------------------------------------------------


def test_upstream_descriptors_cover_the_whole_api(upstream: dict[str, FDP]) -> None:
    # Guards against comparing two empty sets: the pinned side must hold the full API.
    facts = api_facts(upstream.values())
    rpcs = {key.rsplit(".", 1)[1] for key in facts if key.startswith("rpc .apache.rocketmq.v2.MessagingService.")}
    assert {
        "QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment", "ReceiveMessage", "AckMessage",
        "ForwardMessageToDeadLetterQueue", "PullMessage", "UpdateOffset", "GetOffset", "QueryOffset",
        "EndTransaction", "Telemetry", "NotifyClientTermination", "ChangeInvisibleDuration",
        "RecallMessage", "SyncLiteSubscription",
    } <= rpcs
    assert "rpc .apache.rocketmq.v2.Admin.DescribeGroupAccumulation" in facts
    assert "field .apache.rocketmq.v2.Settings.client_properties" in facts
    assert "enum value .apache.rocketmq.v2.Code.INVALID_CLIENT_PROPERTIES" in facts
    assert sum(key.startswith("message ") for key in facts) > 100


def test_our_api_matches_rocketmq_apis_head(ours: dict[str, FDP], upstream: dict[str, FDP]) -> None:
    problems = api_differences(ours.values(), upstream.values())
    assert not problems, "proto/ diverges from rocketmq-apis HEAD:\n" + "\n".join(problems)


def test_descriptors_are_identical_to_rocketmq_apis_head(
    ours: dict[str, FDP], upstream: dict[str, FDP]
) -> None:
    # Beyond wire compatibility: same declaration order and options, so reflection-based tools
    # (grpcurl, descriptor dumps) see exactly upstream's API.
    assert sorted(ours) == sorted(upstream)
    for name, theirs in upstream.items():
        assert ours[name] == theirs, f"{name}: descriptor differs (declaration order or options?)"


def test_official_client_speaks_a_subset_of_our_api(ours: dict[str, FDP], official: dict[str, FDP]) -> None:
    # The Python client (rocketmq-python-client) lags rocketmq-apis: everything it knows must be
    # ours unchanged; what it lacks (client_properties, the Admin expansion) is only additions.
    problems = [p for p in api_differences(ours.values(), official.values()) if not p.startswith("extra in ours: ")]
    assert not problems, "the official client's API is not a subset of ours:\n" + "\n".join(problems)


def test_official_client_and_orbitmq_bindings_import_together() -> None:
    # OrbitMQ's bindings live in their own descriptor pool, so the client's older copy of the same
    # files loads beside them in either order, and the two interoperate on the wire.
    script = (
        "import sys\n"
        "first, second = ('rocketmq.grpc_protocol', 'orbitmq.proto.apache.rocketmq.v2')[::int(sys.argv[1])]\n"
        "import importlib\n"
        "importlib.import_module(first + '.service_pb2'); importlib.import_module(second + '.service_pb2')\n"
        "from rocketmq.grpc_protocol import definition_pb2 as a\n"
        "from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as b, admin_pb2, service_pb2_grpc\n"
        "from orbitmq.proto.pool import Duration\n"
        "assert a.Settings is not b.Settings\n"
        "ours = b.Settings(client_type=b.PRODUCER, request_timeout=Duration(seconds=3),\n"
        "                  client_properties={'app': 'x'})\n"
        "theirs = a.Settings.FromString(ours.SerializeToString())\n"
        "assert theirs.client_type == a.PRODUCER and theirs.request_timeout.seconds == 3\n"
        "assert b.Settings.FromString(theirs.SerializeToString()).client_properties == {'app': 'x'}\n"
        "assert hasattr(service_pb2_grpc, 'MessagingServiceServicer') and admin_pb2.ClientInfo\n"
        "print('ok')\n"
    )
    for order in ("1", "-1"):
        proc = subprocess.run([sys.executable, "-c", script, order], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# --- the comparer itself catches differences ------------------------------------------------


def _message(files: dict[str, FDP], file: str, name: str) -> descriptor_pb2.DescriptorProto:
    return next(m for m in files[file].message_type if m.name == name)


def _field(files: dict[str, FDP], file: str, message: str, field: str) -> FieldProto:
    return next(f for f in _message(files, file, message).field if f.name == field)


def _renumber(files: dict[str, FDP]) -> None:
    _field(files, "definition.proto", "SystemProperties", "message_group").number = 99


def _retype(files: dict[str, FDP]) -> None:
    _field(files, "service.proto", "SendResultEntry", "offset").type = FieldProto.TYPE_INT32


def _drop_optional(files: dict[str, FDP]) -> None:
    field = _field(files, "definition.proto", "SystemProperties", "tag")
    field.proto3_optional = False
    field.ClearField("oneof_index")


def _make_repeated(files: dict[str, FDP]) -> None:
    _field(files, "service.proto", "QueryRouteRequest", "topic").label = FieldProto.LABEL_REPEATED


def _drop_rpc(files: dict[str, FDP]) -> None:
    methods = files["service.proto"].service[0].method
    del methods[len(methods) - 1]


def _unstream(files: dict[str, FDP]) -> None:
    telemetry = next(m for m in files["service.proto"].service[0].method if m.name == "Telemetry")
    telemetry.client_streaming = False


def _extra_enum_value(files: dict[str, FDP]) -> None:
    code = next(e for e in files["definition.proto"].enum_type if e.name == "Code")
    code.value.add(name="ORBITMQ_EXTRA", number=59999)


def _enum_value_number(files: dict[str, FDP]) -> None:
    level = _message(files, "admin.proto", "ChangeLogLevelRequest").enum_type[0]
    level.value[1].number = 7


def _map_value_type(files: dict[str, FDP]) -> None:
    entry = _message(files, "definition.proto", "Message").nested_type[0]
    entry.field[1].type = FieldProto.TYPE_BYTES


def _leave_oneof(files: dict[str, FDP]) -> None:
    _field(files, "service.proto", "TelemetryCommand", "settings").ClearField("oneof_index")


def _extra_field(files: dict[str, FDP]) -> None:
    _message(files, "service.proto", "HeartbeatRequest").field.add(
        name="extra", number=3, type=FieldProto.TYPE_STRING, label=FieldProto.LABEL_OPTIONAL
    )


def _output_type(files: dict[str, FDP]) -> None:
    files["admin.proto"].service[0].method[0].output_type = ".apache.rocketmq.v2.ChangeLogLevelRequest"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_renumber, "field .apache.rocketmq.v2.SystemProperties.message_group"),
        (_retype, "field .apache.rocketmq.v2.SendResultEntry.offset"),
        (_drop_optional, "field .apache.rocketmq.v2.SystemProperties.tag"),
        (_make_repeated, "field .apache.rocketmq.v2.QueryRouteRequest.topic"),
        (_drop_rpc, "rpc .apache.rocketmq.v2.MessagingService.SyncLiteSubscription"),
        (_unstream, "rpc .apache.rocketmq.v2.MessagingService.Telemetry"),
        (_extra_enum_value, "enum value .apache.rocketmq.v2.Code.ORBITMQ_EXTRA"),
        (_enum_value_number, "enum value .apache.rocketmq.v2.ChangeLogLevelRequest.Level.DEBUG"),
        (_map_value_type, "field .apache.rocketmq.v2.Message.UserPropertiesEntry.value"),
        (_leave_oneof, "field .apache.rocketmq.v2.TelemetryCommand.settings"),
        (_extra_field, "field .apache.rocketmq.v2.HeartbeatRequest.extra"),
        (_output_type, "rpc .apache.rocketmq.v2.Admin.ChangeLogLevel"),
    ],
)
def test_comparer_reports_a_mutated_descriptor(
    official: dict[str, FDP], mutate: Callable[[dict[str, FDP]], None], expected: str
) -> None:
    mutated = {name: FDP.FromString(fdp.SerializeToString()) for name, fdp in official.items()}
    mutate(mutated)
    assert api_differences(official.values(), official.values()) == []
    # Reported whichever side carries the change.
    for problems in (
        api_differences(mutated.values(), official.values()),
        api_differences(official.values(), mutated.values()),
    ):
        assert any(p.split(": ", 1)[1].startswith(expected) for p in problems), problems
