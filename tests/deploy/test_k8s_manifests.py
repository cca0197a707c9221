"""deploy/k8s (kustomize base, overlays dev and ha, the monitoring component) and the Dockerfile,
rendered offline and checked against the Kubernetes schemas and the code they start.

Rendering: tests/support/kustomize.py (why not kustomize itself: see that module), compared
with ``kubectl kustomize`` where a kubectl is installed. Schemas: ``kubernetes-validate`` (the
OpenAPI schemas of every Kubernetes minor, shipped in the package, strict: unknown fields fail).
The Prometheus Operator kinds have no schema there; their shape is checked by hand and every
metric their rules query must be one OrbitMQ exports (the live scrape is in test_k8s_boot.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.cli import COMMANDS
from orbitmq.common.config import load_configs
from orbitmq.controller.config import ControllerConfig
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.proxy.config import ProxyConfig
from tests.deploy import k8s_model as km
from tests.support.kustomize import config_map_hash, object_key, render
from tests.support.source_roots import source_roots

CONFIG_CLASSES = {"namesrv": (NamesrvConfig,), "controller": (ControllerConfig,),
                  "broker": (BrokerConfig, MessageStoreConfig), "proxy": (ProxyConfig,)}
# Kubernetes minors the manifests must validate against: the oldest with the StatefulSet
# pod-index label on by default (1.28) and the newest the package ships.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module", params=km.OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[km.Obj]]:
    return request.param, km.rendered(request.param)


def _generated_name_stem(obj: km.Obj) -> km.Obj:
    """A copy with generated ConfigMap names stripped of their hash suffix."""
    text = yaml.safe_dump(obj)
    text = re.sub(r"\b((?:namesrv|controller|broker|proxy)-config)-[a-z0-9]{10}\b", r"\1", text)
    return yaml.safe_load(text)


# -- rendering and schemas -----------------------------------------------------------------------


def test_kubectl_kustomize_renders_the_same_objects(overlay):
    name, objects = overlay
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl here: the offline renderer alone is used")
    out = subprocess.run([kubectl, "kustomize", str(km.K8S / "overlays" / name)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    theirs = {object_key(o): _generated_name_stem(o) for o in yaml.safe_load_all(out) if o}
    mine = {object_key(o): _generated_name_stem(o) for o in objects}
    strip = {(k, ns, re.sub(r"-[a-z0-9]{10}$", "", n) if k == "ConfigMap" else n) for k, ns, n in mine}
    assert strip == {(k, ns, re.sub(r"-[a-z0-9]{10}$", "", n) if k == "ConfigMap" else n)
                     for k, ns, n in theirs}
    mine = {(k, ns, re.sub(r"-[a-z0-9]{10}$", "", n)): o for (k, ns, n), o in mine.items()}
    theirs = {(k, ns, re.sub(r"-[a-z0-9]{10}$", "", n)): o for (k, ns, n), o in theirs.items()}
    for key, obj in mine.items():
        assert obj == theirs[key], f"{name}: {key} differs from kubectl kustomize"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_object_is_valid_against_the_kubernetes_schemas(overlay, version):
    _name, objects = overlay
    checked = 0
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 15


def test_the_overlays_have_the_objects_of_the_issue(overlay):
    name, objects = overlay
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    expected = {("Namespace", "orbitmq"), ("StatefulSet", "namesrv"), ("StatefulSet", "controller"),
                ("StatefulSet", "broker-a"), ("Deployment", "proxy"), ("HorizontalPodAutoscaler", "proxy"),
                ("Service", "namesrv"), ("Service", "controller"), ("Service", "broker-a"), ("Service", "proxy"),
                ("PodDisruptionBudget", "namesrv"), ("PodDisruptionBudget", "controller"),
                ("PodDisruptionBudget", "broker-a"), ("PodDisruptionBudget", "proxy")}
    assert expected <= kinds
    monitoring = {("ServiceMonitor", "orbitmq"), ("PrometheusRule", "orbitmq")}
    assert (monitoring <= kinds) == (name == "ha")
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "orbitmq", object_key(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "orbitmq", object_key(obj)


def test_replica_counts_per_overlay(overlay):
    name, objects = overlay
    counts = {w["metadata"]["name"]: w["spec"]["replicas"] for w in km.of_kind(objects, *km.WORKLOAD_KINDS)}
    hpa = km.one(objects, "HorizontalPodAutoscaler", "proxy")["spec"]
    if name == "dev":
        assert counts == {"namesrv": 1, "controller": 1, "broker-a": 1, "proxy": 1}
        assert hpa["minReplicas"] == 1
    else:
        assert counts == {"namesrv": 2, "controller": 3, "broker-a": 3, "proxy": 2}
        assert hpa["minReplicas"] >= 2
    assert hpa["maxReplicas"] > hpa["minReplicas"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "proxy"}


def test_generated_config_map_names_follow_their_content(overlay):
    _name, objects = overlay
    for cm in km.of_kind(objects, "ConfigMap"):
        stem, _, suffix = cm["metadata"]["name"].rpartition("-")
        assert suffix == config_map_hash(stem, cm["data"])
    assert config_map_hash("x", {"a": "1"}) != config_map_hash("x", {"a": "2"})
    referenced = {v["configMap"]["name"] for w in km.of_kind(objects, *km.WORKLOAD_KINDS)
                  for v in km.pod_spec(w).get("volumes", []) if "configMap" in v}
    assert referenced == set(km.config_maps(objects)), "a pod mounts a ConfigMap that is not generated"


def test_renderer_refuses_what_it_does_not_implement(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(ValueError, match="namePrefix"):
        render(tmp_path)


# -- command lines and config --------------------------------------------------------------------


def _containers(objects):
    return [(w, c) for w in km.of_kind(objects, *km.WORKLOAD_KINDS) for c in km.containers(w)]


def test_every_container_runs_a_real_orbitmq_sub_command(overlay):
    _name, objects = overlay
    subs = set()
    for workload, container in _containers(objects):
        sub = km.sub_command(container)
        assert sub in COMMANDS, f"{container['name']}: `orbitmq {sub}` is not a sub-command"
        assert container["image"] == "orbitmq:0.1.0"
        subs.add(sub)
        # Every $(VAR) of the command line is defined in the container's env.
        env = km.env_values(container, km.pod_names(workload)[0], "10.0.0.9", "orbitmq")
        for arg in km.argv(container):
            for var in km.ENV_REF.findall(arg):
                assert var in env, f"{container['name']}: {arg} uses $({var}), which is not in its env"
    assert subs == {"namesrv", "controller", "broker", "proxy"}


@pytest.mark.parametrize("sub", ["namesrv", "controller", "broker", "proxy"])
def test_command_line_and_config_are_accepted_by_the_service(overlay, sub, tmp_path):
    """`orbitmq <svc> <args> -p` loads the mounted file and the overrides with no unknown key and
    prints exactly the values the manifests mean (mount paths mapped to files written here)."""
    _name, objects = overlay
    workload, container = km.workload_for(objects, sub)
    pod = km.pod_names(workload)[0]
    env = km.env_values(container, pod, "10.0.0.9", "orbitmq")
    files = km.mounted_files(objects, workload, container)
    local = {}
    for path, content in files.items():
        target = tmp_path / Path(path).name
        target.write_text(content)
        local[path] = str(target)
    args = [local.get(a, a) for a in (km.expand(a, env) for a in km.argv(container)[1:])]
    proc = subprocess.run([sys.executable, "-m", "orbitmq", *args, "-p"], capture_output=True, text=True,
                          timeout=60, cwd=km.REPO, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "unknown config keys" not in proc.stderr, proc.stderr
    printed = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    for key, value in km.effective_config(objects, workload, container, pod, "10.0.0.9").items():
        assert printed[key] == value, f"{sub}: {key}={printed[key]!r}, expected {value!r}"
    (path,) = files  # one config file per container, loaded by the service's own config classes
    assert load_configs(local[path], None, *CONFIG_CLASSES[sub]).unknown_keys == ()


def test_address_lists_name_every_pod(overlay):
    """NameServers, controllers and Raft peers are addressed by their pods' stable DNS names;
    the lists in the config (after the overlay's overrides) match the replica counts."""
    _name, objects = overlay
    namesrv_sts = km.one(objects, "StatefulSet", "namesrv")
    controller_sts, controller_c = km.workload_for(objects, "controller")
    (namesrv_c,) = km.containers(namesrv_sts)
    namesrv_port = km.resolve_port(namesrv_c, "remoting")
    namesrvs = [f"{n}:{namesrv_port}" for n in km.sts_dns_names(objects, namesrv_sts)]
    raft_port = km.resolve_port(controller_c, "raft")
    remoting_port = km.resolve_port(controller_c, "remoting")
    controller_names = km.sts_dns_names(objects, controller_sts)
    broker = km.effective_config(objects, *km.workload_for(objects, "broker"))
    proxy = km.effective_config(objects, *km.workload_for(objects, "proxy"))
    assert km.addr_list(broker["namesrvAddr"]) == namesrvs
    assert km.addr_list(proxy["namesrvAddr"]) == namesrvs
    assert km.addr_list(broker["controllerAddr"]) == [f"{n}:{remoting_port}" for n in controller_names]
    for i, pod in enumerate(km.pod_names(controller_sts)):
        config = km.effective_config(objects, controller_sts, controller_c, pod)
        assert config["controllerDLegerSelfId"] == f"n{i}"
        assert km.addr_list(config["controllerDLegerPeers"]) == [
            f"n{j}-{name}:{raft_port}" for j, name in enumerate(controller_names)]
        assert int(config["listenPort"]) == remoting_port
    service = km.one(objects, "Service", "controller")["spec"]
    assert service["publishNotReadyAddresses"] is True, "Raft peers must resolve before they are ready"
    assert km.one(objects, "StatefulSet", "controller")["spec"]["podManagementPolicy"] == "Parallel"


def test_brokers_run_in_controller_mode_on_their_volume(overlay):
    _name, objects = overlay
    workload, container = km.workload_for(objects, "broker")
    config = km.effective_config(objects, workload, container)
    assert config["enableControllerMode"] == "true"
    assert config["brokerId"] == "-1"
    assert config["brokerIP1"] == "10.244.1.23", "brokerIP1 must come from the pod IP"
    claims = {c["metadata"]["name"] for c in workload["spec"]["volumeClaimTemplates"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[config["storePathRootDir"]] in claims, "storePathRootDir is not on the PVC"
    assert {km.resolve_port(container, "remoting"), km.resolve_port(container, "ha")} == {
        int(config["listenPort"]), int(config["haListenPort"])}
    assert km.pod_spec(workload)["terminationGracePeriodSeconds"] >= 60
    controller, c_container = km.workload_for(objects, "controller")
    c_config = km.effective_config(objects, controller, c_container, "controller-0")
    c_mounts = {m["mountPath"]: m["name"] for m in c_container["volumeMounts"]}
    assert c_mounts[c_config["controllerStorePath"]] in {
        c["metadata"]["name"] for c in controller["spec"]["volumeClaimTemplates"]}


# -- probes, security, resources ----------------------------------------------------------------


def test_probes_hit_what_the_services_serve(overlay):
    _name, objects = overlay
    for workload, container in _containers(objects):
        sub = km.sub_command(container)
        config = km.effective_config(objects, workload, container, km.pod_names(workload)[0])
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(kind)
            assert probe, f"{container['name']} has no {kind}"
            if "httpGet" in probe:
                assert config["metricsExporterType"] == "PROM", f"{sub}: {kind} needs the metrics endpoint"
                assert km.resolve_port(container, probe["httpGet"]["port"]) == int(config["metricsPromExporterPort"])
                assert probe["httpGet"]["path"] in ("/ready", "/live")
            elif "grpc" in probe:
                assert sub == "proxy"
                assert probe["grpc"]["port"] == int(config["grpcServerPort"])
                assert probe["grpc"]["port"] in km.container_ports(container).values()
            else:
                port = km.resolve_port(container, probe["tcpSocket"]["port"])
                assert port in km.container_ports(container).values()
        if sub == "proxy":
            assert container["readinessProbe"]["grpc"]["service"] == "apache.rocketmq.v2.MessagingService"
            assert container["lifecycle"]["preStop"]
        assert km.pod_spec(workload)["terminationGracePeriodSeconds"] >= 15


def test_pods_run_as_non_root_with_limits(overlay):
    _name, objects = overlay
    for workload, container in _containers(objects):
        pod_sc = km.pod_spec(workload)["securityContext"]
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == 10001
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
        resources = container["resources"]
        assert resources["requests"]["cpu"] and resources["requests"]["memory"] and resources["limits"]["memory"]
        # A read-only root: HOME must be a volume (the services keep state under ~).
        assert km.IMAGE_HOME in {m["mountPath"] for m in container["volumeMounts"]}


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_services_and_budgets_select_their_pods(overlay):
    _name, objects = overlay
    workloads = km.of_kind(objects, *km.WORKLOAD_KINDS)
    for workload in workloads:
        assert _matches(workload["spec"]["selector"]["matchLabels"], workload["spec"]["template"]["metadata"]["labels"])
    for service in km.of_kind(objects, "Service"):
        selected = [w for w in workloads if _matches(service["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])]
        assert len(selected) == 1, f"Service {service['metadata']['name']} selects {len(selected)} workloads"
        (container,) = km.containers(selected[0])
        names = {p["name"] for p in service["spec"]["ports"]}
        assert "metrics" in names, "the ServiceMonitor scrapes the `metrics` port of every Service"
        for port in service["spec"]["ports"]:
            km.resolve_port(container, port["targetPort"])
    for pdb in km.of_kind(objects, "PodDisruptionBudget"):
        assert any(_matches(pdb["spec"]["selector"]["matchLabels"], w["spec"]["template"]["metadata"]["labels"])
                   for w in workloads)
        assert pdb["spec"].get("maxUnavailable") == 1, "one pod at a time, and a 1-replica dev set stays drainable"
    for sts in km.of_kind(objects, "StatefulSet"):
        governing = km.one(objects, "Service", sts["spec"]["serviceName"])
        assert governing["spec"]["clusterIP"] == "None"


# -- monitoring ----------------------------------------------------------------------------------


def test_monitoring_objects_are_well_formed():
    objects = km.rendered("ha")
    monitor = km.one(objects, "ServiceMonitor", "orbitmq")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    services = km.of_kind(objects, "Service")
    selected = [s for s in services if _matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
    assert len(selected) == len(services)
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
    rules = km.alert_rules(objects)
    names = {r["alert"] for r in rules}
    assert {"OrbitMQConsumerLagHigh", "OrbitMQBrokerDiskNearlyFull", "OrbitMQBrokerSetNoMaster",
            "OrbitMQProxyErrorRateHigh"} <= names
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"]
        assert rule["expr"].count("(") == rule["expr"].count(")")
    # The disk alerts fire at and before broker.conf's diskMaxUsedSpaceRatio.
    ratio = int(km.effective_config(objects, *km.workload_for(objects, "broker"))["diskMaxUsedSpaceRatio"])
    disk = {r["alert"]: r["expr"] for r in rules if "kubelet_volume_stats" in r["expr"]}
    assert f">= {ratio / 100:.2f}" in disk["OrbitMQBrokerDiskFull"]
    threshold = float(re.search(r"> (0\.\d+)", disk["OrbitMQBrokerDiskNearlyFull"]).group(1))
    assert threshold < ratio / 100


def test_alert_rules_query_metrics_the_code_exports():
    """Every metric name a rule uses is defined in the source roots (the live scrape in
    test_k8s_boot.py checks the running processes export them)."""
    sources = "\n".join(p.read_text(encoding="utf-8") for root in source_roots().values()
                        for p in root.rglob("*.py"))
    names = km.rule_metric_names(km.rendered("ha"))
    assert {"rocketmq_consumer_lag_messages", "rocketmq_proxy_rpc_total", "active_broker_num"} <= names
    missing = {n for n in names if f'"{n}"' not in sources and f'"{n.removesuffix("_total")}"' not in sources}
    assert not missing, f"alert rules query metrics nobody defines: {sorted(missing)}"


# -- the image -----------------------------------------------------------------------------------


def test_dockerfile_builds_the_one_non_root_image():
    text = (km.REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim$", text, re.M)
    assert 'ENTRYPOINT ["orbitmq"]' in text
    (user,) = re.findall(r"^USER (.+)$", text, re.M)
    uid = re.search(r"^ARG ORBITMQ_UID=(\d+)$", text, re.M).group(1)
    assert user == "${ORBITMQ_UID}:${ORBITMQ_UID}" and int(uid) == 10001 != 0
    assert f"HOME={km.IMAGE_HOME}" in text
    assert "pip install ." in text
    for port in (9876, 9877, 9878, 10911, 10912, 8081, 5557):
        assert str(port) in re.search(r"^EXPOSE (.+)$", text, re.M).group(1)
