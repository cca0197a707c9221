"""deploy/k8s (kustomize base) and the Dockerfile, checked against the code they start.

No cluster is needed: the manifests are parsed as YAML, every container's command line is run
through the real ``orbitmq <service> … -p`` (print config and exit) with the mounted config
files mapped back to deploy/k8s, and the config files are loaded with the real config classes.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.cli import COMMANDS
from orbitmq.config import ConfigBase, load_configs, parse_cli_overrides
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.proxy.config import ProxyConfig

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")

# DESIGN.md, "Default ports (RocketMQ's own)": the ports each service's containers expose.
DESIGN_PORTS: dict[str, set[int]] = {"namesrv": {9876}, "broker": {10911, 10912}, "proxy": {8081}}
# The config classes each sub-command builds from its -c file and key=value arguments.
CONFIG_CLASSES: dict[str, tuple[type[ConfigBase], ...]] = {
    "namesrv": (NamesrvConfig,),
    "broker": (BrokerConfig, MessageStoreConfig),
    "proxy": (ProxyConfig,),
}
# Stand-ins for downward-API values when a command line is run outside Kubernetes.
FIELD_REF_SAMPLES = {"status.podIP": "10.244.1.23", "metadata.name": "pod-0",
                     "metadata.namespace": "orbitmq", "spec.nodeName": "node-1"}
ENV_REF = re.compile(r"\$\((\w+)\)")


# -- loading -------------------------------------------------------------------------------------


def _load_all(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def _kustomization() -> dict[str, Any]:
    (doc,) = _load_all(K8S / "kustomization.yaml")
    return doc


def _resources() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in _kustomization()["resources"]:
        docs.extend(_load_all(K8S / name))
    return docs


def _of_kind(*kinds: str) -> list[dict[str, Any]]:
    return [d for d in _resources() if d["kind"] in kinds]


def _workloads() -> list[dict[str, Any]]:
    return _of_kind(*WORKLOAD_KINDS)


def _one(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _of_kind(kind) if d["metadata"]["name"] == name]
    return doc


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def _containers(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = _pod_spec(workload)
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def _argv(container: dict[str, Any]) -> list[str]:
    """The arguments after `orbitmq`: the image's ENTRYPOINT is ["orbitmq"], so `args` alone
    are its arguments; a `command` replaces the entry point and must name it itself."""
    command = container.get("command")
    args = [str(a) for a in container.get("args", [])]
    if command is None:
        return args
    assert command[0] == "orbitmq", f"{container['name']}: command {command} does not run orbitmq"
    return [str(c) for c in command[1:]] + args


def _sub_command(container: dict[str, Any]) -> str:
    argv = _argv(container)
    assert argv, f"{container['name']}: no orbitmq sub-command (the image would print --help)"
    return argv[0]


def _generated_files() -> dict[str, Path]:
    """ConfigMap name -> {key: file} of the configMapGenerator entries."""
    result: dict[str, dict[str, Path]] = {}
    for gen in _kustomization().get("configMapGenerator", []):
        files = {}
        for entry in gen.get("files", []):
            key, _, source = entry.rpartition("=")
            files[key or Path(source).name] = K8S / source
        result[gen["name"]] = files
    return result


def _mounted_config_files(workload: dict[str, Any], container: dict[str, Any]) -> dict[str, Path]:
    """In-container path of each generated config file -> the file in deploy/k8s."""
    generated = _generated_files()
    volumes = {v["name"]: v for v in _pod_spec(workload).get("volumes", [])}
    result: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        cm = volumes.get(mount["name"], {}).get("configMap")
        if cm is None or cm["name"] not in generated:
            continue
        files = generated[cm["name"]]
        if "subPath" in mount:
            result[mount["mountPath"]] = files[mount["subPath"]]
            continue
        items = cm.get("items") or [{"key": k, "path": k} for k in files]
        for item in items:
            result[f"{mount['mountPath'].rstrip('/')}/{item['path']}"] = files[item["key"]]
    return result


def _env_samples(container: dict[str, Any]) -> dict[str, str]:
    values = {}
    for env in container.get("env", []):
        if "value" in env:
            values[env["name"]] = str(env["value"])
        else:
            values[env["name"]] = FIELD_REF_SAMPLES[env["valueFrom"]["fieldRef"]["fieldPath"]]
    return values


def _local_argv(workload: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """The container's argv as it would reach orbitmq, runnable here: $(VAR) expanded from its
    env and mounted config files replaced by their deploy/k8s sources."""
    env = _env_samples(container)
    files = _mounted_config_files(workload, container)
    result = []
    for arg in _argv(container):
        for var in ENV_REF.findall(arg):
            assert var in env, f"{container['name']}: {arg} uses $({var}), which is not in its env"
        arg = ENV_REF.sub(lambda m: env[m.group(1)], arg)
        result.append(str(files.get(arg, arg)))
    return result


def _all_containers() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(w, c) for w in _workloads() for c in _containers(w)]


def _container_for(sub_command: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (found,) = [(w, c) for w, c in _all_containers() if _sub_command(c) == sub_command]
    return found


def _conf(name: str) -> Path:
    return K8S / name


# -- kustomization and files ---------------------------------------------------------------------


def test_every_yaml_document_parses_and_is_a_named_object():
    paths = sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*.yml"))
    assert paths
    for path in paths:
        docs = _load_all(path)
        assert docs, f"{path.name} is empty"
        for doc in docs:
            assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), path.name
            if path.name != "kustomization.yaml":
                assert doc["metadata"]["name"], path.name


def test_kustomization_lists_only_existing_files_and_every_manifest():
    kust = _kustomization()
    assert kust["kind"] == "Kustomization"
    listed = list(kust["resources"])
    for gen in kust.get("configMapGenerator", []):
        listed += [entry.rpartition("=")[2] for entry in gen.get("files", [])]
    for name in listed:
        assert (K8S / name).is_file(), f"kustomization.yaml lists {name}, which does not exist"
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert manifests == set(kust["resources"]), "a manifest in deploy/k8s is not in resources"
    assert {"broker-config", "proxy-config"} <= set(_generated_files())
    assert _generated_files()["broker-config"] == {"broker.conf": K8S / "broker.conf"}
    assert _generated_files()["proxy-config"] == {"proxy.conf": K8S / "proxy.conf"}


def test_namespace_is_orbitmq_and_created_by_the_base():
    kust = _kustomization()
    assert kust["namespace"] == "orbitmq"
    assert [d["metadata"]["name"] for d in _of_kind("Namespace")] == ["orbitmq"]
    assert any(entry["pairs"] for entry in kust["labels"]), "no common labels"


def test_images_are_the_orbitmq_image():
    names = {img["name"] for img in _kustomization()["images"]}
    for _workload, container in _all_containers():
        assert container["image"] in names, f"{container['name']} runs {container['image']}"


# -- command lines and config --------------------------------------------------------------------


def test_every_container_runs_a_real_orbitmq_sub_command():
    seen = set()
    for _workload, container in _all_containers():
        sub = _sub_command(container)
        assert sub in COMMANDS, f"{container['name']}: `orbitmq {sub}` is not a sub-command"
        module = importlib.import_module(COMMANDS[sub][0])
        assert callable(getattr(module, "main", None)), f"orbitmq {sub} is not built"
        seen.add(sub)
    assert seen == {"namesrv", "broker", "proxy"}


@pytest.mark.parametrize("sub_command", ["namesrv", "broker", "proxy"])
def test_container_command_line_is_accepted_by_the_service(sub_command):
    """`orbitmq <svc> <args> -p` parses the flags, loads the mounted config file and the
    key=value overrides, and prints the effective config: exactly what the pod would start with."""
    workload, container = _container_for(sub_command)
    argv = _local_argv(workload, container)
    # Every key=value override is a key of the service's config classes.
    overrides = parse_cli_overrides([a for a in argv[1:] if "=" in a and not a.startswith("-")])
    known = frozenset().union(*(cls.config_keys() for cls in CONFIG_CLASSES[sub_command]))
    assert set(overrides) <= known, f"unknown override keys {set(overrides) - known}"

    proc = subprocess.run([sys.executable, "-m", "orbitmq", *argv, "-p"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    shown = shlex.join(["orbitmq", *argv, "-p"])
    assert proc.returncode == 0, f"{shown} failed:\n{proc.stderr}"
    assert "unknown config keys" not in proc.stderr, f"{shown}:\n{proc.stderr}"
    printed = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    for key, value in overrides.items():
        assert printed[key] == value, f"{shown}: {key}={printed[key]!r}, expected {value!r}"


def test_broker_and_proxy_configs_load_with_no_unknown_keys():
    broker = load_configs(_conf("broker.conf"), None, BrokerConfig, MessageStoreConfig)
    assert broker.unknown_keys == ()
    proxy = load_configs(_conf("proxy.conf"), None, ProxyConfig)
    assert proxy.unknown_keys == ()

    broker_config, store_config = broker
    assert broker_config.broker_cluster_name == "DefaultCluster"
    assert broker_config.broker_name == "broker-a"
    assert broker_config.broker_id == 0
    assert store_config.flush_disk_type == "ASYNC_FLUSH"
    assert store_config.broker_role == "ASYNC_MASTER"
    assert store_config.delete_when == "04"
    assert store_config.file_reserved_time == 72
    # Set per pod from the downward API, never baked into the shared file.
    assert "brokerIP1" not in broker.values
    (proxy_config,) = proxy
    assert proxy_config.rocket_mq_cluster_name == broker_config.broker_cluster_name
    assert proxy_config.proxy_mode == "cluster"


def test_broker_registers_its_pod_ip():
    _workload, container = _container_for("broker")
    assert "brokerIP1=$(POD_IP)" in _argv(container)
    (pod_ip,) = [e for e in container["env"] if e["name"] == "POD_IP"]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def _namesrv_replica_addresses() -> set[str]:
    namesrv = _one("StatefulSet", "namesrv")
    service = _one("Service", namesrv["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None", "per-pod DNS names need a headless Service"
    (port,) = {p["port"] for p in service["spec"]["ports"]}
    name, governing = namesrv["metadata"]["name"], service["metadata"]["name"]
    return {f"{name}-{i}.{governing}:{port}" for i in range(namesrv["spec"]["replicas"])}


def test_broker_and_proxy_name_every_namesrv_replica():
    expected = _namesrv_replica_addresses()
    assert expected == {"namesrv-0.namesrv:9876", "namesrv-1.namesrv:9876"}
    (broker_config, _store) = load_configs(_conf("broker.conf"), None, BrokerConfig, MessageStoreConfig)
    assert set(broker_config.namesrv_addr_list()) == expected
    (proxy_config,) = load_configs(_conf("proxy.conf"), None, ProxyConfig)
    assert {a.strip() for a in proxy_config.namesrv_addr.split(";") if a.strip()} == expected


# -- ports, probes, services ---------------------------------------------------------------------


def _container_ports(container: dict[str, Any]) -> dict[str, int]:
    return {p.get("name", str(p["containerPort"])): p["containerPort"] for p in container.get("ports", [])}


def test_container_ports_match_design():
    for _workload, container in _all_containers():
        sub = _sub_command(container)
        assert set(_container_ports(container).values()) == DESIGN_PORTS[sub], container["name"]


def test_services_listen_where_their_containers_declare():
    (broker_config, _store) = load_configs(_conf("broker.conf"), None, BrokerConfig, MessageStoreConfig)
    assert {broker_config.listen_port, broker_config.ha_listen_port} == DESIGN_PORTS["broker"]
    (proxy_config,) = load_configs(_conf("proxy.conf"), None, ProxyConfig)
    assert proxy_config.grpc_server_port in DESIGN_PORTS["proxy"]
    _workload, container = _container_for("namesrv")
    overrides = parse_cli_overrides([a for a in _argv(container)[1:] if "=" in a])
    (namesrv_config,) = load_configs(None, overrides, NamesrvConfig)
    assert namesrv_config.listen_port in DESIGN_PORTS["namesrv"]


def _probe_port(container: dict[str, Any], probe: dict[str, Any]) -> int:
    port = probe["tcpSocket"]["port"]
    ports = _container_ports(container)
    if isinstance(port, str):
        assert port in ports, f"{container['name']}: probe port {port!r} is not a declared port"
        return ports[port]
    assert port in ports.values()
    return port


def test_probes_are_tcp_on_the_service_port():
    main_port = {"namesrv": 9876, "broker": 10911, "proxy": 8081}
    for _workload, container in _all_containers():
        sub = _sub_command(container)
        for kind in ("readinessProbe", "livenessProbe"):
            assert kind in container, f"{container['name']} has no {kind}"
        for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
            if kind in container:
                assert _probe_port(container, container[kind]) == main_port[sub], (container["name"], kind)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_services_select_labels_their_workloads_carry():
    workloads = _workloads()
    for workload in workloads:
        pod_labels = workload["spec"]["template"]["metadata"]["labels"]
        assert _matches(workload["spec"]["selector"]["matchLabels"], pod_labels), workload["metadata"]["name"]
    for service in _of_kind("Service"):
        selector = service["spec"]["selector"]
        selected = [w for w in workloads if _matches(selector, w["spec"]["template"]["metadata"]["labels"])]
        assert selected, f"Service {service['metadata']['name']} selects no workload"
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for workload in selected:
                declared = {}
                for container in _containers(workload):
                    declared.update(_container_ports(container))
                assert target in declared or target in declared.values(), (service["metadata"]["name"], target)
    for pdb in _of_kind("PodDisruptionBudget"):
        labels = [w["spec"]["template"]["metadata"]["labels"] for w in workloads]
        assert any(_matches(pdb["spec"]["selector"]["matchLabels"], lb) for lb in labels), pdb["metadata"]["name"]
    services = {s["metadata"]["name"]: s for s in _of_kind("Service")}
    for sts in _of_kind("StatefulSet"):
        governing = services[sts["spec"]["serviceName"]]
        assert governing["spec"]["clusterIP"] == "None"
        assert _matches(governing["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])


# -- workload shape ------------------------------------------------------------------------------


def test_broker_statefulset_keeps_its_store_on_a_volume():
    broker = _one("StatefulSet", "broker-a")
    assert broker["spec"]["replicas"] == 1
    (_store_cfg_broker, store_config) = load_configs(_conf("broker.conf"), None, BrokerConfig, MessageStoreConfig)
    claims = {c["metadata"]["name"] for c in broker["spec"]["volumeClaimTemplates"]}
    (container,) = _containers(broker)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts.get(store_config.store_path_root_dir) in claims, "storePathRootDir is not on the PVC"
    # The -c file is the generated broker.conf.
    config_arg = _argv(container)[_argv(container).index("-c") + 1]
    assert _mounted_config_files(broker, container)[config_arg] == K8S / "broker.conf"
    # Time to unregister, persist offsets and flush the store before SIGKILL.
    assert _pod_spec(broker)["terminationGracePeriodSeconds"] >= 60


def test_namesrv_and_proxy_replicas():
    namesrv = _one("StatefulSet", "namesrv")
    assert namesrv["spec"]["replicas"] == 2
    assert namesrv["spec"]["podManagementPolicy"] == "Parallel"
    proxy = _one("Deployment", "proxy")
    assert proxy["spec"]["replicas"] == 2
    (container,) = _containers(proxy)
    config_arg = _argv(container)[_argv(container).index("-c") + 1]
    assert _mounted_config_files(proxy, container)[config_arg] == K8S / "proxy.conf"


def test_every_container_requests_resources_and_runs_as_non_root():
    for workload, container in _all_containers():
        requests = container["resources"]["requests"]
        assert requests.get("cpu") and requests.get("memory"), container["name"]
        pod_security = _pod_spec(workload)["securityContext"]
        assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


# -- container image -----------------------------------------------------------------------------


def _dockerfile_stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        current += " " + stripped.removesuffix("\\").strip() if current else stripped.removesuffix("\\").strip()
        if not stripped.endswith("\\"):
            logical.append(current)
            current = ""
    stages: list[list[str]] = []
    for instruction in logical:
        if instruction.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def test_dockerfile_is_multi_stage_non_root_with_orbitmq_entrypoint():
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    build, final = _dockerfile_stages()
    build_text, final_text = "\n".join(build), "\n".join(final)
    assert "grpcio-tools" in build_text and "proto/generate.py" in build_text and "pip install ." in build_text
    assert build_text.index("proto/generate.py") < build_text.index("pip install .")
    assert "grpcio-tools" not in final_text, "protoc must stay in the build stage"
    assert any(i.startswith("COPY --from=build") for i in final)
    (user,) = [i for i in final if i.startswith("USER ")]
    assert user.split()[1].split(":")[0] not in ("root", "0")
    assert 'ENTRYPOINT ["orbitmq"]' in final
    (expose,) = [i for i in final if i.startswith("EXPOSE ")]
    assert {int(p) for p in expose.split()[1:]} == set().union(*DESIGN_PORTS.values())
    # The uid the image runs as is the one the pods ask for.
    uid = re.search(r"ARG ORBITMQ_UID=(\d+)", final_text).group(1)
    for workload in _workloads():
        assert _pod_spec(workload)["securityContext"]["runAsUser"] == int(uid)


def test_dockerignore_keeps_the_build_inputs_and_drops_the_rest():
    patterns = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "**/node_modules", "tests", "sdk/proto"} <= patterns
    needed = ["pyproject.toml", "setup.py", "README.md", "proto", "sdk", "services"]
    for name in needed:
        assert (REPO / name).exists()
        assert name not in patterns and not any(p in ("*", "**") for p in patterns), name
