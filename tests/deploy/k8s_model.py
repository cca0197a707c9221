"""What the manifest tests need to know about rendered deploy/k8s objects: pods, containers,
their command lines, mounted config files and the effective RocketMQ config each one starts with.

Shared by test_k8s_manifests.py (static checks) and test_k8s_boot.py (the cluster booted as
local processes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.support.kustomize import render

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("dev", "ha")
WORKLOAD_KINDS = ("Deployment", "StatefulSet")
# The image's ENTRYPOINT (Dockerfile) and HOME, which a container without `command` runs with.
IMAGE_ENTRYPOINT = ["orbitmq"]
IMAGE_HOME = "/home/orbitmq"
ENV_REF = re.compile(r"\$\((\w+)\)")
POD_INDEX_LABEL = "metadata.labels['apps.kubernetes.io/pod-index']"

# What Kubernetes itself exports (kubelet volume statistics), not OrbitMQ.
FOREIGN_METRIC_PREFIXES = ("kubelet_",)
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}

Obj = dict[str, Any]


def rendered(overlay: str) -> list[Obj]:
    return render(K8S / "overlays" / overlay)


def of_kind(objects: list[Obj], *kinds: str) -> list[Obj]:
    return [o for o in objects if o["kind"] in kinds]


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_spec(workload: Obj) -> Obj:
    return workload["spec"]["template"]["spec"]


def containers(workload: Obj) -> list[Obj]:
    spec = pod_spec(workload)
    return [*spec.get("initContainers", []), *spec["containers"]]


def argv(container: Obj) -> list[str]:
    """The container's full argv, the image's ENTRYPOINT when it has no `command`."""
    command = container.get("command") or IMAGE_ENTRYPOINT
    return [str(c) for c in command] + [str(a) for a in container.get("args", [])]


def sub_command(container: Obj) -> str:
    args = argv(container)
    assert args[0] == "orbitmq", f"{container['name']}: runs {args[0]}, not orbitmq"
    assert len(args) > 1, f"{container['name']}: no orbitmq sub-command (the image would print --help)"
    return args[1]


def container_ports(container: Obj) -> dict[str, int]:
    return {p.get("name", str(p["containerPort"])): p["containerPort"] for p in container.get("ports", [])}


def resolve_port(container: Obj, port: int | str) -> int:
    ports = container_ports(container)
    if isinstance(port, str):
        assert port in ports, f"{container['name']}: port {port!r} is not declared"
        return ports[port]
    return port


def config_maps(objects: list[Obj]) -> dict[str, dict[str, str]]:
    return {o["metadata"]["name"]: o.get("data", {}) for o in of_kind(objects, "ConfigMap")}


def mounted_files(objects: list[Obj], workload: Obj, container: Obj) -> dict[str, str]:
    """In-container path of each file mounted from a ConfigMap -> its content."""
    cms = config_maps(objects)
    volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
    result: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        cm = volumes.get(mount["name"], {}).get("configMap")
        if cm is None:
            continue
        data = cms[cm["name"]]
        if "subPath" in mount:
            result[mount["mountPath"]] = data[mount["subPath"]]
            continue
        items = cm.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            result[f"{mount['mountPath'].rstrip('/')}/{item['path']}"] = data[item["key"]]
    return result


def pod_names(workload: Obj) -> list[str]:
    """StatefulSet pods are <name>-<ordinal>; a Deployment's get a made-up stable suffix here."""
    name, count = workload["metadata"]["name"], workload["spec"].get("replicas", 1)
    if workload["kind"] == "StatefulSet":
        return [f"{name}-{i}" for i in range(count)]
    return [f"{name}-5f7b9c-{chr(ord('a') + i)}x{i}" for i in range(count)]


def env_values(container: Obj, pod_name: str, pod_ip: str, namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet would set it (downward API included)."""
    field_refs = {"status.podIP": pod_ip, "metadata.name": pod_name, "metadata.namespace": namespace,
                  "spec.nodeName": "node-1"}
    if re.fullmatch(r".*-\d+", pod_name):
        field_refs[POD_INDEX_LABEL] = pod_name.rsplit("-", 1)[1]
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand(str(item["value"]), env)
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in field_refs, f"{container['name']}: fieldRef {path} not modelled"
            env[item["name"]] = field_refs[path]
    return env


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in args and env values; unknown references stay as written."""
    return ENV_REF.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def parse_properties(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip()
    return values


def effective_config(objects: list[Obj], workload: Obj, container: Obj, pod_name: str = "pod-0",
                     pod_ip: str = "10.244.1.23") -> dict[str, str]:
    """The -c file's keys, then the key=value arguments over them (as `orbitmq <svc>` merges)."""
    env = env_values(container, pod_name, pod_ip, "orbitmq")
    args = [expand(a, env) for a in argv(container)[2:]]
    files = mounted_files(objects, workload, container)
    values: dict[str, str] = {}
    if "-c" in args:
        path = args[args.index("-c") + 1]
        assert path in files, f"{container['name']}: -c {path} is not a mounted ConfigMap file"
        values.update(parse_properties(files[path]))
    for arg in args:
        if "=" in arg and not arg.startswith("-"):
            key, _, value = arg.partition("=")
            values[key] = value
    return values


def workload_for(objects: list[Obj], sub: str) -> tuple[Obj, Obj]:
    (found,) = [(w, c) for w in of_kind(objects, *WORKLOAD_KINDS) for c in containers(w) if sub_command(c) == sub]
    return found


def sts_dns_names(objects: list[Obj], workload: Obj) -> list[str]:
    """<pod>.<governing Service> for each pod of a StatefulSet, as its config files name them."""
    service = one(objects, "Service", workload["spec"]["serviceName"])
    assert service["spec"].get("clusterIP") == "None", "per-pod DNS names need a headless Service"
    return [f"{pod}.{service['metadata']['name']}" for pod in pod_names(workload)]


def addr_list(value: str) -> list[str]:
    return [a.strip() for a in value.split(";") if a.strip()]


# -- alert rules -----------------------------------------------------------------------------------


def alert_rules(objects: list[Obj]) -> list[Obj]:
    return [r for g in one(objects, "PrometheusRule", "orbitmq")["spec"]["groups"] for r in g["rules"]]


def promql_metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (not functions, label names, keywords or numbers)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        word = m.group(0)
        if word in PROMQL_WORDS or expr[m.end():].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def rule_metric_names(objects: list[Obj]) -> set[str]:
    names = set()
    for rule in alert_rules(objects):
        names |= promql_metric_names(rule["expr"])
    return {n for n in names if not n.startswith(FOREIGN_METRIC_PREFIXES)}
